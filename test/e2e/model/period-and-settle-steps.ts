/**
 * The model's steps for calendar quotas and usage rules: a clock step to a period's edge (the
 * next start, a few periods on, or the zone's next daylight-saving change), and a settle of an
 * admitted request's usage (usage-reference.ts judges the answer and the windows after it).
 */
import type fc from "fast-check";
import { nextOffsetChange, nthStartAfter } from "./calendar-reference";
import type { Admission, Policy } from "./reference";
import { isCounted } from "./usage-count-reference";
import { resetAfter } from "./usage-entries";
import { checkUsageWindows, expectSettle, recordSettle } from "./usage-reference";
import { POLICIES, type World } from "./world";

type Step = fc.AsyncCommand<World, World, false>;

/** The calendar policies a clock step aims at. */
export const CALENDAR = ["daily", "weekly", "monthly"];
/** How many period starts on a step jumps (12 and 24 from March: February, then a leap one). */
export const PERIODS_ON = [1, 1, 1, 2, 12, 24];
/** Where around the edge it lands: its last millisecond, first, and a little either side. */
export const EDGE_OFFSETS = [-1_000, -1, 0, 1, 5_000];

/**
 * A clock step to `offset` ms from a period's edge: `n` starts on, or (n = 0) a DST change; the
 * rule's period, or key `k`'s (on its own anchor, when its override gives one).
 */
export class ToPeriodEdge implements Step {
  constructor(
    readonly p: string,
    readonly n: number,
    readonly offset: number,
    readonly k?: number,
  ) {}
  private target(w: World): number | undefined {
    const policy = POLICIES[this.p] as Policy;
    const period =
      this.k === undefined ? policy.period : w.ref.periodOf(policy, w.keys[this.k] as string);
    if (!period) return undefined;
    const edge =
      this.n === 0
        ? nextOffsetChange(period.timezone, w.now())
        : nthStartAfter(period, w.now(), this.n);
    return edge === undefined ? undefined : edge + this.offset;
  }
  check(w: World) {
    // A reshard run has no calendar rule (the config refuses one during a reshard).
    return w.on("calendar") && !w.cfg.reshard;
  }
  async run(w: World) {
    const target = this.target(w);
    if (target !== undefined && target > w.now()) w.advance(target - w.now());
  }
  toString() {
    const sign = this.offset >= 0 ? "+" : "";
    const key = this.k === undefined ? "" : `/k${this.k}`;
    return `clock to ${this.p}${key} ${this.n === 0 ? "dst" : `start ${this.n}`} ${sign}${this.offset}`;
  }
}

/**
 * Receipts a settle may pick: those with a usage admission, or (`any`) every one; one whose
 * window's or period's usage was refunded or reset only while that meeting is on.
 */
function settleable(w: World, any: boolean) {
  const counted = (r: (typeof w.receipts)[number], why: (a: Admission) => boolean) =>
    r.admissions.some((a) => isCounted(a.policy) && why(a));
  return w.receipts.filter(
    (r) =>
      (any || r.admissions.some((a) => a.policy.usage)) &&
      (w.on("refunds×usage-count") || !counted(r, (a) => a.refunded)) &&
      (w.on("reset×usage-count") || !counted(r, (a) => resetAfter(w.ref, a) !== undefined)),
  );
}

/**
 * A settle of an admitted request's usage: `tenths` of its reservation (0 to 2×), once or twice
 * in a row (the second must change nothing). A pick among every receipt (`any`) may settle a
 * request with no usage rule: "unknown".
 */
export class Settle implements Step {
  constructor(
    readonly iso: number,
    readonly pick: number,
    readonly tenths: number,
    readonly twice: boolean,
    readonly any: boolean,
  ) {}
  check(w: World) {
    return w.on("usage") && settleable(w, this.any).length > 0;
  }
  async run(w: World) {
    const candidates = settleable(w, this.any);
    const entry = candidates[this.pick % candidates.length] as (typeof candidates)[number];
    const usage = entry.admissions.filter((a) => a.policy.usage);
    const reservation = usage[0]?.cost ?? 1;
    const units = Math.round((this.tenths * reservation) / 10);
    const isolate = w.isolate(this.iso);
    for (let n = 0; n < (this.twice ? 2 : 1); n++) {
      const expected = expectSettle(w.ref, entry.admissions, performance.now());
      // An isolate still on the old config after `at` (a broken premise) has no client for the
      // shard the reshard added: a part there fails.
      if (isolate.oldConfig) expected.statuses.add("failed");
      const out = await isolate.limiter.settle(entry.receipt, units);
      w.ref.next();
      const admitted = entry.admissions
        .map(
          (a) =>
            `${a.policy.policy}/${a.key.slice(-2)}×${a.cost} t=${a.t - w.ref.now} ${a.source} on ${a.shard}`,
        )
        .join(", ");
      const context = `${w.when()} (${this}: ${units} units, attempt ${n + 1}, admitted ${admitted}${out.error ? `, error ${out.error}` : ""})`;
      recordSettle(w.ref, expected, out, units, context);
      for (const a of usage) checkUsageWindows(w.ref, a.policy, a.key, context);
    }
  }
  toString() {
    return `settle(iso${this.iso}, #${this.pick}, ${this.tenths / 10}×${this.twice ? ", twice" : ""}${this.any ? ", any" : ""})`;
  }
}

/** A step of this file from its `toString()`, or undefined. */
export function parsePeriodOrSettle(text: string): Step | undefined {
  const edge = /^clock to ([a-z]+)(?:\/k(\d+))? (?:start (\d+)|dst) ([+-]\d+)$/.exec(text);
  if (edge) {
    const k = edge[2] === undefined ? undefined : Number(edge[2]);
    return new ToPeriodEdge(edge[1] as string, Number(edge[3] ?? 0), Number(edge[4]), k);
  }
  const settle = /^settle\(iso(\d), #(\d+), ([\d.]+)×(, twice)?(, any)?\)$/.exec(text);
  if (settle) {
    return new Settle(
      Number(settle[1]),
      Number(settle[2]),
      Math.round(Number(settle[3]) * 10),
      settle[4] !== undefined,
      settle[5] !== undefined,
    );
  }
  return undefined;
}
