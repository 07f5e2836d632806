/**
 * The reference for usage rules that keep one count per window or period (docs/usage.md, its
 * "How exact"): a fixed window (epoch-aligned) or a calendar period. A settle
 * charges only the window or period its request was counted in, while that one runs and within
 * a day of the admission (MAX_SETTLE_AGE_MS), once (its once-gate); after either it charges
 * nothing and answers unknown, the reservation standing where it was counted.
 *
 * The bound: per window or period, take the last admission k counted in it; its units (each
 * entry settled or not) are at most the limit plus what the entries not yet settled when k was
 * decided (k included) used beyond their reservations. With covering reservations: never over.
 *
 * The store's count lives in real time (its key's PX: the window's or period's end from the
 * admission's model time, plus the caller clock's grace and a period's margin), while the model's
 * clock jumps: a count whose key may have lapsed in real time is taken as restarted (laxer).
 */
import { MAX_SETTLE_AGE_MS } from "../../../src/store/caps";
import { periodOf } from "./calendar-reference";
import { type Admission, LOCAL_SOURCES, type Policy, type Reference, Violation } from "./reference";
import { resetAfter, type SettleStatus, settledBefore, unitsOf } from "./usage-entries";

/** The caller clock's grace on every key's PX (scripts.ts GRACE). */
const GRACE_MS = 1_000;
/** A period's key outlives it by this (calendar.lua.ts CAL_MARGIN). */
const PERIOD_MARGIN_MS = 60_000;
/** Real time the test's own bookkeeping may be off by (performance.now() after the call). */
const REAL_SLACK_MS = 100;

/** A usage rule that keeps a count per window or period, not an entry per request. */
export const isCounted = (policy: Policy) =>
  policy.usage === true && policy.algorithm !== "sliding-log-weighted";

/** The window or period that holds `t`. */
function bucketOf(policy: Policy, t: number): { start: number; end: number } {
  if (policy.period) {
    const { start, next } = periodOf(policy.period, t);
    return { start, end: next };
  }
  const start = Math.floor(t / policy.windowMs) * policy.windowMs;
  return { start, end: start + policy.windowMs };
}

/** The real instant (performance.now) after which the key its commit wrote may have lapsed. */
function lapsesAt(a: Admission, end: number): number {
  const extra = a.policy.period ? PERIOD_MARGIN_MS + GRACE_MS : GRACE_MS;
  return (a.realT ?? 0) + (end - a.t) + extra - REAL_SLACK_MS;
}

/** The admissions the store counted for this key, by window or period, in the order decided. */
function byBucket(ref: Reference, policy: Policy, key: string): Map<number, Admission[]> {
  const out = new Map<number, Admission[]>();
  for (const a of ref.admissions) {
    if (a.policy !== policy || a.key !== key || LOCAL_SOURCES.has(a.source)) continue;
    const { start } = bucketOf(policy, a.t);
    const list = out.get(start) ?? [];
    list.push(a);
    out.set(start, list);
  }
  return out;
}

/** The bound in every window or period of this key (checked after an admission and a settle). */
export function checkUsageCounts(ref: Reference, policy: Policy, key: string, context: string) {
  for (const [start, all] of byBucket(ref, policy, key)) {
    const { end } = bucketOf(policy, start);
    // The count restarts where its key may have lapsed in real time before the next commit.
    let segment: Admission[] = [];
    for (const k of all) {
      const last = segment.at(-1);
      if (last && (k.realT ?? 0) > lapsesAt(last, end)) segment = [];
      segment.push(k);
      const counts = (e: Admission) => !e.refunded && resetAfter(ref, e) === undefined;
      if (!counts(k)) continue;
      let units = 0;
      let excess = 0;
      for (const e of segment) {
        if (!counts(e)) continue;
        units += unitsOf(e);
        if (!settledBefore(e, k.seq)) excess += Math.max(0, unitsOf(e) - e.cost);
      }
      if (units > policy.limit + excess) {
        const span = policy.period ? `the ${policy.period.unit}` : `the window`;
        throw new Violation(
          "usage-count",
          `${units} units in ${span} from ${new Date(start).toISOString()} up to t=${k.t - ref.start} (${policy.policy} ${key}), over the limit ${policy.limit} plus the in-flight excess ${excess} ${context}`,
        );
      }
    }
  }
}

/**
 * What a settle of this admission may answer now (its shard up; `out` holds "failed" if a cut
 * connection may fail it): nothing to charge once its window or period is over or a day has
 * passed; else as the weighted log's entry, the once-gate standing for the entry's mark.
 */
export function countedOutcomes(
  ref: Reference,
  a: Admission,
  realNow: number,
  out: Set<SettleStatus>,
): Set<SettleStatus> {
  const { end } = bucketOf(a.policy, a.t);
  if (ref.now >= end || ref.now - a.t >= MAX_SETTLE_AGE_MS) {
    out.add("unknown");
    return out;
  }
  const reset = resetAfter(ref, a);
  const wasSettled = a.settled !== undefined || a.settleUncertain !== undefined;
  // Refunded or reset: nothing of it left to charge (docs/usage.md: 404); its gate, if a settle
  // came first, may answer that settle.
  const gone = (a.refunded && !a.refundUncertain) || reset?.ok === true;
  const latest = byBucket(ref, a.policy, a.key)
    .get(bucketOf(a.policy, a.t).start)
    ?.at(-1) as Admission;
  const lapsed = realNow > lapsesAt(latest, end);
  if (a.refunded || reset !== undefined || lapsed || rebornBeside(ref, a)) out.add("unknown");
  if (gone) {
    if (wasSettled) out.add("already-settled");
    return out;
  }
  if (wasSettled) out.add("already-settled");
  if (a.settled === undefined || a.settleUncertain !== undefined) out.add("settled");
  return out;
}

/**
 * Whether the count `a` was counted in may have been started after a reset (one that found a
 * count) by another admission in the same millisecond as `a` (lua/count-stamp.lua.ts): its stamp
 * cannot tell `a` from an admission before the reset, so `a`'s settle changes nothing (its
 * reservation stands).
 */
function rebornBeside(ref: Reference, a: Admission): boolean {
  const reset = ref.resets
    .get(`${a.policy.policy}\u0000${a.key}`)
    ?.filter((r) => r.seq < a.seq)
    .at(-1);
  if (!reset) return false;
  const first = ref.admissions.find(
    (e) =>
      e.policy === a.policy && e.key === a.key && e.seq > reset.seq && !LOCAL_SOURCES.has(e.source),
  );
  return first !== undefined && first !== a && first.t === a.t;
}
