/**
 * The reference for usage rules (docs/usage.md): an admission's `cost` is a reservation that a
 * settle turns, once, into what the request used. Two promises are kept here:
 *
 * - the bound ("How exact"): take any rolling window and the last admission k in it; its units
 *   (each entry settled or not) are at most the limit plus what the entries not yet settled when
 *   k was decided (k included) used beyond their reservations. With covering reservations that
 *   excess is 0: never over the limit.
 * - a settle's answer: per admission what it may be (settled, already settled, unknown: refunded,
 *   reset or out of the log; failed: its shard is out), put together as a sharded settle does.
 *
 * Where the model cannot know (a refund, reset or settle that failed, an entry that may have
 * left its log), it allows each outcome, and counts a settle it cannot tell as in flight with
 * the larger units: laxer, never stricter, than the store.
 */
import { type Admission, LOCAL_SOURCES, type Policy, type Reference, Violation } from "./reference";
import { checkUsageCounts, countedOutcomes, isCounted } from "./usage-count-reference";
import { resetAfter, type SettleStatus, settledBefore, unitsOf } from "./usage-entries";

const RANK: Record<SettleStatus, number> = {
  failed: 3,
  settled: 2,
  "already-settled": 1,
  unknown: 0,
};

/** The bound on every rolling window of a usage rule's key whose last admission is recent. */
export function checkUsageWindows(ref: Reference, policy: Policy, key: string, context: string) {
  if (isCounted(policy)) return checkUsageCounts(ref, policy, key, context);
  const live = ref.admissions.filter(
    (a) =>
      a.policy === policy &&
      a.key === key &&
      !a.refunded &&
      !LOCAL_SOURCES.has(a.source) &&
      resetAfter(ref, a) === undefined,
  );
  for (const k of live) {
    if (k.t <= ref.now - 3 * policy.windowMs) continue;
    let units = 0;
    let excess = 0;
    for (const e of live) {
      if (e.seq > k.seq || e.t <= k.t - policy.windowMs) continue;
      units += unitsOf(e);
      if (!settledBefore(e, k.seq)) excess += Math.max(0, unitsOf(e) - e.cost);
    }
    if (units > policy.limit + excess) {
      throw new Violation(
        "usage-window",
        `${units} units in the ${policy.windowMs} ms up to t=${k.t - ref.start} (${policy.policy} ${key}), over the limit ${policy.limit} plus the in-flight excess ${excess} ${context}`,
      );
    }
  }
}

/** What a settle of this admission may answer now. */
function outcomesOf(ref: Reference, a: Admission, realNow: number): Set<SettleStatus> {
  const shard = a.shard ?? "";
  const down = (ref.faults.get(shard)?.mode ?? "up") !== "up";
  // Admitted by an isolate's fallback: the store never held it (a receipt's part from the
  // store that did answer leaves it out, or its shard is asked and is still out).
  if (LOCAL_SOURCES.has(a.source)) return new Set(down ? ["unknown", "failed"] : ["unknown"]);
  if (down) return new Set(["failed"]);
  const out = new Set<SettleStatus>();
  // A shard that was out once may fail an isolate's next call on a connection the test's proxy
  // cut (the client's pool learns of it then): failed, nothing changed, as in an outage.
  if (!ref.shardHealthy(shard) || ref.wasOut.has(shard)) out.add("failed");
  if (isCounted(a.policy)) return countedOutcomes(ref, a, realNow, out);
  const reset = resetAfter(ref, a);
  const gone = (a.refunded && !a.refundUncertain) || reset?.ok === true;
  // Its entry may be gone: refunded or reset (a failure may have landed), out of the window (it
  // leaves the log at the next decision of the key), or the key expired in real time.
  const mayBeGone =
    a.refunded ||
    reset !== undefined ||
    a.t <= ref.now - a.policy.windowMs ||
    realNow - (a.realT ?? realNow) > 2 * a.policy.windowMs;
  if (mayBeGone) out.add("unknown");
  if (gone) return out;
  if (a.settled !== undefined || a.settleUncertain !== undefined) out.add("already-settled");
  if (a.settled === undefined || a.settleUncertain !== undefined) out.add("settled");
  return out;
}

export interface SettleExpectation {
  statuses: Set<SettleStatus>;
  /** Per usage admission: what it may answer. */
  parts: { a: Admission; outcomes: Set<SettleStatus> }[];
}

/** What a settle of a receipt with these admissions may answer (an empty list: "unknown"). */
export function expectSettle(
  ref: Reference,
  admissions: readonly Admission[],
  realNow: number,
): SettleExpectation {
  const parts = admissions
    .filter((a) => a.policy.usage)
    .map((a) => ({ a, outcomes: outcomesOf(ref, a, realNow) }));
  // A settle's status is its parts' highest (failed, settled, already, unknown).
  let statuses = new Set<SettleStatus>(["unknown"]);
  for (const part of parts) {
    const next = new Set<SettleStatus>();
    for (const s of statuses) {
      for (const o of part.outcomes) next.add(RANK[o] > RANK[s] ? o : s);
    }
    statuses = next;
  }
  return { statuses, parts };
}

/**
 * Checks a settle's answer against the expectation, then records what it settled: sure when the
 * admission could only be settled (or it is the receipt's one usage admission and the answer
 * says so), else as a settle that may have happened.
 */
export function recordSettle(
  ref: Reference,
  expected: SettleExpectation,
  answer: { status: SettleStatus; charged: readonly number[] },
  units: number,
  context: string,
) {
  const { status, charged } = answer;
  const shown = `answered ${status} charged [${charged}], expected ${[...expected.statuses].join(" or ")}`;
  if (!expected.statuses.has(status)) throw new Violation("settle", `${shown} ${context}`);
  // A receipt settled on two shards, one of them out, answers failed with the other's charge:
  // that part is settled (a retry of the settle counts it once), the other is not.
  const mayCharge =
    status === "settled" ||
    (status === "failed" && expected.parts.some((p) => p.outcomes.has("settled")));
  if (!mayCharge && charged.some((c) => c !== 0)) {
    throw new Violation("settle", `${shown}: nothing may change ${context}`);
  }
  const sure = expected.parts.every((p) => p.outcomes.size === 1);
  if (mayCharge && sure) {
    const want = expected.parts
      .map((p) => (p.outcomes.has("settled") ? units - p.a.cost : 0))
      .sort((x, y) => x - y);
    const got = [...charged].sort((x, y) => x - y);
    // Parts with no usage rule answer no `charged` entry: compare the nonzero ones.
    if (want.filter((c) => c !== 0).join() !== got.filter((c) => c !== 0).join()) {
      throw new Violation("settle", `${shown}, charged should be [${want}] ${context}`);
    }
  }
  const only = expected.parts.length === 1;
  // A failed settle of one admission changed nothing; of several, a part may have settled.
  if (status === "unknown" || status === "already-settled" || (status === "failed" && only)) {
    return;
  }
  for (const { a, outcomes } of expected.parts) {
    if (!outcomes.has("settled")) continue;
    if (outcomes.size === 1 || (only && status === "settled")) {
      a.settled = { units, seq: ref.seq };
      delete a.settleUncertain;
    } else {
      a.settleUncertain = Math.max(a.settleUncertain ?? 0, units, a.cost);
    }
  }
}
