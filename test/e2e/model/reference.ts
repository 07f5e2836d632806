/**
 * The reference model: what the library promises, kept as plain bookkeeping of what it answered,
 * and checked after every step. Each check is exact where the docs promise exactness and is
 * skipped where they do not (a decision the failure policy made, a step whose outcome the test
 * cannot know, a documented slack).
 *
 * Time is one manual clock every isolate reads, and each call is sent and answered at one
 * instant of it, so "counted strictly, send to receive" is counting at that instant.
 */
import type { CalendarPeriod } from "../../../src/limiter/calendar-period";
import type { Algorithm } from "../../../src/store/algorithm";
import { KeyAnchors } from "./anchor-reference";
import { periodOf } from "./calendar-reference";

/** A step's answer that breaks a promise: the property, and what was seen. */
export class Violation extends Error {
  constructor(
    readonly property: string,
    detail: string,
  ) {
    super(`${property}: ${detail}`);
    this.name = "Violation";
  }
}

export interface Policy {
  policy: string;
  algorithm: Algorithm;
  limit: number;
  /** The window, or a concurrency slot's timeout. */
  windowMs: number;
  failMode: "open" | "closed";
  lease?: true;
  overrides?: true;
  /** A calendar quota's period (its windowMs is the period's longest length). */
  period?: CalendarPeriod;
  /** A usage rule: `cost` is a reservation a settle changes (usage-reference.ts). */
  usage?: true;
}

/** Sources that mean the failure policy answered, not the store. */
export const FAILURE_SOURCES = new Set(["fail-open", "fail-closed", "fallback"]);
/** Sources of an admission the store did not count (per isolate at most: the fallback). */
export const LOCAL_SOURCES = new Set(["fail-open", "fallback"]);

const EXACT = new Set<Algorithm>(["sliding-log", "calendar"]);

/** A lease's units may be spent this long after a reset by the isolates that did not reset. */
const LEASE_AFTER_RESET_MS = 1_000;
/** The furthest ahead a lease stamps (STAMP_AHEAD_MAX_MS): part of a transition's length. */
const STAMP_AHEAD_MS = 10_000;

export interface Admission {
  seq: number;
  t: number;
  iso: string;
  policy: Policy;
  key: string;
  cost: number;
  source: string;
  refunded: boolean;
  /** A refund of it failed: it may still count. */
  refundUncertain?: true;
  /** The shard that decided it. */
  shard?: string | undefined;
  /** Its settle (usage rules): the units, and the step that settled it. */
  settled?: { units: number; seq: number };
  /** A settle whose outcome is unknown: it may hold these units (the largest tried). */
  settleUncertain?: number;
  /** performance.now() when admitted: the store's key lives on in real time, not the model's. */
  realT?: number;
}

export interface HeldSlot {
  seq: number;
  t: number;
  iso: string;
  key: string;
  policy: Policy;
  ref: { policy: string; key: string; slot: string; expires: number; shard?: string };
  /** Lapses at this instant (the smaller of the promised timeout and the slot's expires). */
  until: number;
  state: "held" | "released" | "unknown";
  local: boolean;
}

interface PlanState {
  override: number | undefined;
  /** A write whose outcome is unknown (it failed): the limit is any value ever set. */
  unknown: boolean;
  ever: number[];
  blockedSeq: number | undefined;
  /** The last write came from an isolate on the old config (a reshard run, before `at`). */
  oldConfig: boolean;
}

export interface Reshard {
  at: number;
  settleMs: number;
  /** Whether a key changes shard at `at`. */
  moved: (key: string) => boolean;
}

const pk = (policy: string, key: string) => `${policy}\u0000${key}`;

export class Reference {
  seq = 0;
  now: number;
  readonly admissions: Admission[] = [];
  readonly slots: HeldSlot[] = [];
  readonly resets = new Map<string, { seq: number; t: number; iso: string; ok: boolean }[]>();
  readonly plans = new Map<string, PlanState>();
  /** Changes after which an isolate's memory may deny what the store would admit. */
  readonly changes: { policy: string; key: string; t: number; iso: string; plan: boolean }[] = [];
  readonly netBlocks = new Map<string, { t: number; iso: string; removed: boolean }>();
  /** Per shard: its proxy mode and when it last changed. */
  readonly faults = new Map<string, { mode: string; since: number }>();
  /** Shards that were down or hung at some point of the run. */
  readonly wasOut = new Set<string>();
  /** Calendar keys' own anchors (their overrides'). */
  readonly anchors = new KeyAnchors();
  /**
   * A key's anchor changed in its current period: judge the units since that period's start
   * (docs/calendar-quotas.md), or (false: anchor-mid-period off) only those since the change.
   */
  sinceNewStart = true;
  operations = 0;

  constructor(
    readonly start: number,
    readonly reshard: Reshard | undefined,
  ) {
    this.now = start;
  }

  next(): number {
    this.operations++;
    return ++this.seq;
  }

  /** No shard faulty now or within the breaker's longest cool-down (1.5 s) plus a margin. */
  allHealthy(): boolean {
    for (const fault of this.faults.values()) {
      if (fault.mode !== "up" || this.now - fault.since < 2_000) return false;
    }
    return true;
  }

  shardHealthy(name: string): boolean {
    const fault = this.faults.get(name);
    return fault === undefined || (fault.mode === "up" && this.now - fault.since >= 2_000);
  }

  /** A moved key between `at` and the end of its transition for this policy. */
  inTransition(policy: Policy, key: string, t = this.now): boolean {
    const r = this.reshard;
    if (r === undefined || !r.moved(key)) return false;
    return t >= r.at && t < r.at + r.settleMs + STAMP_AHEAD_MS + 2 * policy.windowMs;
  }

  private plan(policy: string, key: string): PlanState {
    const id = pk(policy, key);
    let state = this.plans.get(id);
    if (!state) {
      state = {
        override: undefined,
        unknown: false,
        ever: [],
        blockedSeq: undefined,
        oldConfig: false,
      };
      this.plans.set(id, state);
    }
    return state;
  }

  /** A plan whose writes the product may have forgotten by design (docs/shards.md, limits). */
  private planMayBeLost(policy: Policy, key: string, state: PlanState): boolean {
    const r = this.reshard;
    if (!r || !state.oldConfig || !r.moved(key)) return false;
    return this.now >= r.at + r.settleMs + STAMP_AHEAD_MS + policy.windowMs;
  }

  /** The limit a check of this key is held to now (the largest it may be, when unknown). */
  limitOf(policy: Policy, key: string): number {
    if (!policy.overrides) return policy.limit;
    const state = this.plans.get(pk(policy.policy, key));
    if (!state) return policy.limit;
    if (state.unknown || this.planMayBeLost(policy, key, state)) {
      return Math.max(policy.limit, ...state.ever);
    }
    return state.override ?? policy.limit;
  }

  recordOverride(
    policy: Policy,
    key: string,
    iso: string,
    oldConfig: boolean,
    value: number | undefined,
    ok: boolean,
  ) {
    const state = this.plan(policy.policy, key);
    if (value !== undefined) state.ever.push(value);
    if (ok) state.override = value;
    else state.unknown = true;
    state.oldConfig = oldConfig;
    this.changes.push({ policy: policy.policy, key, t: this.now, iso, plan: true });
  }

  recordBlock(
    policy: Policy,
    key: string,
    iso: string,
    oldConfig: boolean,
    blocked: boolean,
    ok: boolean,
  ) {
    const state = this.plan(policy.policy, key);
    // Only a block known written is promised; a failed unblock may have unblocked.
    state.blockedSeq = blocked && ok ? this.seq : undefined;
    if (!ok) state.unknown = true;
    state.oldConfig = oldConfig;
    this.changes.push({ policy: policy.policy, key, t: this.now, iso, plan: true });
  }

  /** Whether a block of this key is promised to hold now. */
  blocked(policy: Policy, key: string): boolean {
    const state = this.plans.get(pk(policy.policy, key));
    if (!state || state.blockedSeq === undefined) return false;
    return !this.planMayBeLost(policy, key, state);
  }

  recordReset(policy: Policy, key: string, iso: string, ok = true) {
    const id = pk(policy.policy, key);
    const list = this.resets.get(id) ?? [];
    list.push({ seq: this.seq, t: this.now, iso, ok });
    this.resets.set(id, list);
    this.changes.push({ policy: policy.policy, key, t: this.now, iso, plan: false });
  }

  lastReset(policy: Policy, key: string) {
    return this.resets.get(pk(policy.policy, key))?.at(-1);
  }

  recordRefund(admissions: Admission[], iso: string, ok = true) {
    for (const a of admissions) {
      a.refunded = true;
      if (!ok) a.refundUncertain = true;
      this.changes.push({ policy: a.policy.policy, key: a.key, t: this.now, iso, plan: false });
    }
  }

  /**
   * An isolate other than `iso` may still deny this key from its memory of an answer the store
   * no longer gives (a refund or reset elsewhere: until its Retry-After; a plan change: 1 s).
   */
  mayRememberStale(policy: Policy, key: string, iso: string): boolean {
    return this.changes.some(
      (c) =>
        c.policy === policy.policy &&
        c.key === key &&
        ((c.plan && this.now - c.t <= 1_000) ||
          (c.iso !== iso && this.now - c.t <= policy.windowMs + 1_000)),
    );
  }

  /** The key's calendar period: the rule's, on the key's own anchor when it has one. */
  periodOf(policy: Policy, key: string): CalendarPeriod | undefined {
    return policy.period && this.anchors.periodFor(policy.period, policy.policy, key);
  }

  /** Where this key's window (or calendar period) holding now starts: admissions after it count. */
  private since(policy: Policy, key: string): number {
    const period = this.periodOf(policy, key);
    return period ? periodOf(period, this.now).start - 1 : this.now - policy.windowMs;
  }

  /**
   * Admissions the store counts for this key in the window (or period) ending now (`afterSeq`:
   * only those decided after that step).
   */
  private counted(policy: Policy, key: string, afterSeq = 0): number {
    const reset = this.lastReset(policy, key);
    const since = this.since(policy, key);
    let sum = 0;
    for (const a of this.admissions) {
      if (a.policy.policy !== policy.policy || a.key !== key || a.refunded) continue;
      if (LOCAL_SOURCES.has(a.source)) continue;
      if (a.t <= since || a.t > this.now || a.seq <= afterSeq) continue;
      if (reset && a.seq < reset.seq) continue;
      // A lease granted before a reset may be spent for a while after it by the other isolates.
      if (
        reset &&
        a.source === "lease" &&
        a.iso !== reset.iso &&
        a.t - reset.t <= LEASE_AFTER_RESET_MS
      ) {
        continue;
      }
      // A usage rule's settled units (the larger, when a settle's outcome is unknown).
      sum += a.policy.usage ? Math.max(a.settled?.units ?? a.cost, a.settleUncertain ?? 0) : a.cost;
    }
    return sum;
  }

  /** Never more than the limit admitted in a rolling window (checked when one is admitted). */
  checkWindow(policy: Policy, key: string, context: string) {
    if (policy.algorithm === "concurrency") return this.checkInFlight(policy, key, context);
    if (policy.period && this.anchors.unknown(policy.policy, key)) return;
    const changed =
      policy.period && !this.sinceNewStart
        ? this.anchors.changedIn(policy.period, policy.policy, key, this.now)
        : undefined;
    const sum = this.counted(policy, key, changed?.seq);
    if (EXACT.has(policy.algorithm)) {
      const limit = this.limitOf(policy, key);
      if (sum > limit) {
        const span = policy.period ? `the ${policy.period.unit}` : `${policy.windowMs} ms`;
        throw new Violation(
          "window",
          `${sum} units admitted in ${span} at limit ${limit} (${policy.algorithm} ${policy.policy} ${key}) ${context}`,
        );
      }
      return;
    }
    // The O(1) algorithms: exact per aligned window (fixed, counter) or in their own model
    // (bucket), so at most twice the limit in any rolling window; a key moved by a reshard
    // starts afresh on its new shard (docs/shards.md), one window more of slack.
    if (this.inTransition(policy, key)) return;
    if (sum > 2 * policy.limit) {
      throw new Violation(
        "window",
        `${sum} units admitted in ${policy.windowMs} ms, over twice the limit ${policy.limit} (${policy.algorithm} ${policy.policy} ${key}) ${context}`,
      );
    }
  }

  /**
   * A calendar quota's answer from the store (or a denial it cached): its reset is the next
   * period's start, and it denies only what the period has no room left for. The most the store
   * may hold is what the model counts, unless a refund or reset of the key in this period failed
   * (it may not have landed): then a denial is not judged.
   */
  checkPeriodAnswer(
    policy: Policy,
    key: string,
    cost: number,
    d: { allowed: boolean; source: string; reset: number; retryAfterMs: number },
    iso: string,
    context: string,
  ) {
    const period = this.periodOf(policy, key);
    if (!period || (d.source !== "redis" && d.source !== "cache")) return;
    if (this.anchors.unknown(policy.policy, key)) return;
    const { start, next } = periodOf(period, this.now);
    const what = `(${policy.policy} ${key}, ${period.unit} from ${new Date(start).toISOString()})`;
    if (
      d.source === "redis" &&
      (d.reset !== next || (!d.allowed && d.retryAfterMs !== next - this.now))
    ) {
      throw new Violation(
        "period-reset",
        `answered reset ${new Date(d.reset).toISOString()} retry ${d.retryAfterMs} ms, the next period starts ${new Date(next).toISOString()} ${what} ${context}`,
      );
    }
    if (d.allowed) return;
    if (d.source === "cache" && this.mayRememberStale(policy, key, iso)) return;
    // The store's one count may carry units of the old anchor's period from before this one's
    // start (its last admission is after it): more than the model counts, so not judged.
    if (this.anchors.changedIn(policy.period as CalendarPeriod, policy.policy, key, this.now)) {
      return;
    }
    const failed = this.admissions.some(
      (a) => a.policy === policy && a.key === key && a.refundUncertain && a.t >= start,
    );
    const resets = this.resets.get(pk(policy.policy, key)) ?? [];
    if (failed || resets.some((r) => !r.ok && r.t >= start)) return;
    const counted = this.counted(policy, key);
    const limit = this.limitOf(policy, key);
    if (counted + cost <= limit) {
      throw new Violation(
        "period-denial",
        `denied ${cost} (${d.source}) with ${counted} of ${limit} counted in the period ${what} ${context}`,
      );
    }
  }

  /** Each isolate's fallback admits at most the limit per window on its own. */
  checkFallbackWindow(policy: Policy, key: string, iso: string, context: string) {
    if (policy.algorithm === "concurrency") return;
    let sum = 0;
    for (const a of this.admissions) {
      if (a.policy.policy !== policy.policy || a.key !== key || a.iso !== iso) continue;
      if (a.source !== "fallback" || a.refunded) continue;
      if (a.t <= this.now - policy.windowMs) continue;
      sum += a.cost;
    }
    const limit = Math.max(policy.limit, this.limitOf(policy, key));
    if (sum > limit) {
      throw new Violation(
        "fallback-window",
        `isolate ${iso}'s fallback admitted ${sum} at limit ${limit} (${policy.policy} ${key}) ${context}`,
      );
    }
  }

  liveSlots(policy: Policy, key: string, local: boolean, iso?: string): HeldSlot[] {
    return this.slots.filter(
      (s) =>
        s.policy.policy === policy.policy &&
        s.key === key &&
        s.state === "held" &&
        s.local === local &&
        (iso === undefined || s.iso === iso) &&
        this.now < s.until,
    );
  }

  /** Never more in flight than the limit: in the store, and in each isolate's fallback. */
  checkInFlight(policy: Policy, key: string, context: string) {
    const held = this.liveSlots(policy, key, false);
    if (held.length > policy.limit) {
      throw new Violation(
        "in-flight",
        `${held.length} slots held at limit ${policy.limit} (${key}; taken at ${held.map((s) => `t=${s.t - this.start} on ${s.ref.shard ?? ""}`).join(", ")}) ${context}`,
      );
    }
    const isolates = new Set(this.slots.filter((s) => s.local).map((s) => s.iso));
    for (const iso of isolates) {
      const local = this.liveSlots(policy, key, true, iso);
      if (local.length > policy.limit) {
        throw new Violation(
          "fallback-in-flight",
          `isolate ${iso} holds ${local.length} fallback slots at limit ${policy.limit} (${key}) ${context}`,
        );
      }
    }
  }
}
