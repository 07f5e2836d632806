/**
 * The model test's steps as fast-check commands: each runs on the world's isolates and checks
 * what it answered against the reference model (reference.ts), throwing a Violation for a
 * promise broken. A step whose feature is switched off (features.ts) is skipped by `check`.
 */
import fc from "fast-check";
import type { Peek as PeekAnswer } from "../../../src/limiter/peek";
import type { ResetRequest } from "../../../src/limiter/reset";
import type { LimitRequest, MultiDecision } from "../../../src/limiter/types";
import { ANCHORS, Anchor, parseAnchor } from "./anchor-steps";
import type { Feature } from "./features";
import {
  CALENDAR,
  EDGE_OFFSETS,
  PERIODS_ON,
  parsePeriodOrSettle,
  Settle,
  ToPeriodEdge,
} from "./period-and-settle-steps";
import {
  type Admission,
  FAILURE_SOURCES,
  LOCAL_SOURCES,
  type Policy,
  Violation,
} from "./reference";
import { isCounted } from "./usage-count-reference";
import { checkUsageWindows } from "./usage-reference";
import { BLOCKS_REFRESH_MS, POLICIES, policyOn, SHARDS, TIMEOUT_MS, type World } from "./world";

type Step = fc.AsyncCommand<World, World, false>;

interface Part {
  p: string;
  k: number;
  c: number;
}

function request(w: World, part: Part): LimitRequest & { policy: string } {
  const policy = POLICIES[part.p] as Policy;
  // A usage rule's cost is its reservation: 2, 4 or 6 of its 12.
  const cost =
    policy.algorithm === "concurrency"
      ? 1
      : policy.usage
        ? 2 * part.c
        : Math.min(part.c, policy.limit);
  const r: LimitRequest = {
    policy: policy.policy,
    key: w.keys[part.k] as string,
    limit: policy.limit,
    windowMs: policy.windowMs,
    algorithm: policy.algorithm,
    failMode: policy.failMode,
    cost,
  };
  if (policy.period) r.period = policy.period;
  if (policy.lease) r.lease = true;
  if (policy.overrides) r.overrides = true;
  // A fixed window or a period counts usage only when told (the weighted log always does).
  if (policy.usage && policy.algorithm !== "sliding-log-weighted") r.usage = true;
  return r;
}

const policyOf = (r: LimitRequest) => POLICIES[r.policy] as Policy;

/** A request the generator may make in this run. */
function partsAllowed(w: World, parts: readonly Part[]): boolean {
  if (parts.length > 1 && !w.on("multi-policy")) return false;
  const seen = new Set<string>();
  for (const part of parts) {
    if (!policyOn(w.features, part.p)) return false;
    if (part.c > 1 && !w.on("costs")) return false;
    if (part.p === "conc" && !w.reshardAllows("reshard×concurrency")) return false;
    // The config refuses a calendar rule during a reshard (docs/calendar-quotas.md).
    if (POLICIES[part.p]?.period && w.cfg.reshard) return false;
    if (POLICIES[part.p]?.usage && !w.reshardAllows("reshard×usage")) return false;
    const id = `${part.p}/${part.k}`;
    if (seen.has(id)) return false;
    seen.add(id);
  }
  return true;
}

/** A calendar quota's answers: each part's reset, and a denial only of a full period. */
function checkPeriods(
  w: World,
  iso: string,
  requests: readonly LimitRequest[],
  d: MultiDecision,
  context: string,
) {
  for (const [i, r] of requests.entries()) {
    const decision = d.decisions[i];
    if (decision && !d.replayed) {
      w.ref.checkPeriodAnswer(policyOf(r), r.key, r.cost ?? 1, decision, iso, context);
    }
  }
}

/**
 * Records a decision in the model and checks it: the window, in flight, a block, a calendar
 * quota's answer (`periods`: false when the caller checks those once a burst is recorded).
 */
function record(
  w: World,
  iso: string,
  requests: readonly LimitRequest[],
  d: MultiDecision,
  context: string,
  periods = true,
): Admission[] {
  const ref = w.ref;
  ref.next();
  for (const [i, r] of requests.entries()) {
    const policy = policyOf(r);
    const source = d.decisions[i]?.source ?? "?";
    if (d.allowed && ref.blocked(policy, r.key) && !FAILURE_SOURCES.has(source)) {
      throw new Violation(
        "block",
        `${r.policy} ${r.key} is blocked, admitted (${source}) ${context}`,
      );
    }
  }
  if (periods) checkPeriods(w, iso, requests, d, context);
  if (!d.allowed || d.replayed) return [];
  const admitted: Admission[] = [];
  for (const [i, r] of requests.entries()) {
    const policy = policyOf(r);
    const source = d.decisions[i]?.source ?? "?";
    const admission: Admission = {
      seq: ref.seq,
      t: ref.now,
      iso,
      policy,
      key: r.key,
      cost: r.cost ?? 1,
      source,
      refunded: false,
      shard: d.decisions[i]?.shard,
      realT: performance.now(),
    };
    ref.admissions.push(admission);
    admitted.push(admission);
    if (policy.algorithm === "concurrency") {
      const slot = d.slots?.find((s) => s.policy === r.policy && s.key === r.key);
      if (!slot) throw new Violation("in-flight", `admitted ${r.key} with no slot ${context}`);
      // A request id's slot is the same slot on every retry (`r:<id>`): one slot, not two.
      for (const same of ref.slots) {
        if (same.key === r.key && same.ref.slot === slot.slot && same.state === "held") {
          same.state = "released";
        }
      }
      ref.slots.push({
        seq: ref.seq,
        t: ref.now,
        iso,
        key: r.key,
        policy,
        ref: slot,
        until: Math.min(ref.now + policy.windowMs, slot.expires),
        state: "held",
        local: LOCAL_SOURCES.has(source),
      });
    }
  }
  for (const a of admitted) {
    if (LOCAL_SOURCES.has(a.source)) ref.checkFallbackWindow(a.policy, a.key, iso, context);
    else if (a.policy.usage) checkUsageWindows(ref, a.policy, a.key, context);
    else ref.checkWindow(a.policy, a.key, context);
    if (a.policy.algorithm === "concurrency") ref.checkInFlight(a.policy, a.key, context);
  }
  return admitted;
}

const fmt = (parts: readonly Part[]) => parts.map((p) => `${p.p}/k${p.k}×${p.c}`).join("+");

class Decide implements Step {
  constructor(
    readonly iso: number,
    readonly parts: Part[],
    readonly withId: boolean,
  ) {}
  check(w: World) {
    if (!partsAllowed(w, this.parts)) return false;
    if (!this.withId) return true;
    if (!w.on("request-ids") || !w.reshardAllows("reshard×request-ids")) return false;
    const keys = this.parts.map((p) => w.keys[p.k] as string);
    return w.shardsOf(keys).size === 1 || w.on("multi-shard×request-ids");
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const requests = this.parts.map((part) => request(w, part));
    const id = this.withId ? `${w.prefix}-id${w.ref.seq}` : undefined;
    const d = await isolate.limiter.limitAll(requests, id === undefined ? {} : { requestId: id });
    const admitted = record(w, isolate.id, requests, d, `${w.when()} (${this})`);
    if (id !== undefined) {
      const entry = {
        id,
        seq: w.ref.seq,
        t: w.ref.now,
        requests: requests.map((r) => ({ policy: policyOf(r), key: r.key, cost: r.cost ?? 1 })),
        allowed: d.allowed,
        sources: d.decisions.map((x) => x.source),
        shards: d.decisions.map((x) => x.shard),
        refunded: false,
        slots: (d.slots ?? []).map((s) => s.slot),
      };
      w.ids.push(entry);
      if (d.receipt) w.receipts.push({ receipt: d.receipt, admissions: admitted, id: entry });
    } else if (d.receipt) {
      w.receipts.push({ receipt: d.receipt, admissions: admitted });
    }
  }
  toString() {
    return `decide(iso${this.iso}, ${fmt(this.parts)}${this.withId ? ", id" : ""})`;
  }
}

class Retry implements Step {
  constructor(
    readonly iso: number,
    readonly pick: number,
  ) {}
  check(w: World) {
    return w.ids.length > 0;
  }
  async run(w: World) {
    const ref = w.ref;
    const original = w.ids[this.pick % w.ids.length] as (typeof w.ids)[number];
    const isolate = w.isolate(this.iso);
    const requests = original.requests.map(
      (r): LimitRequest => ({
        ...request(w, { p: r.policy.policy, k: w.keys.indexOf(r.key), c: r.cost }),
        cost: r.cost,
      }),
    );
    const keys = original.requests.map((r) => r.key);
    const minWindow = Math.min(...original.requests.map((r) => r.policy.windowMs));
    const expectReplay =
      original.allowed &&
      !original.refunded &&
      original.sources.every((s) => s === "redis") &&
      ref.now - original.t < minWindow &&
      original.requests.every((r) => {
        const reset = ref.lastReset(r.policy, r.key);
        return reset === undefined || reset.seq < original.seq;
      }) &&
      !ref.changes.some((c) => c.plan && keys.includes(c.key) && c.t >= original.t) &&
      // A retry of a request decided on the old shard is decided afresh (docs/shards.md): the
      // shard each part was decided on (an isolate still on the old config says which) must be
      // where the key lives now.
      keys.every((key, i) => original.shards[i] === w.placement.shardOf(key, ref.now));
    const d = await isolate.limiter.limitAll(requests, { requestId: original.id });
    const context = `${w.when()} (${this}: ${original.id} first decided at ${original.t - ref.now} ms, sources ${original.sources})`;
    if (expectReplay && !d.decisions.some((x) => FAILURE_SOURCES.has(x.source))) {
      if (!d.allowed || !d.replayed) {
        throw new Violation(
          "retry",
          `a retry of an admitted request answered allowed=${d.allowed} replayed=${d.replayed}` +
            `${d.conflict ? ` conflict ${JSON.stringify(d.conflict)}` : ""} sources ${d.decisions.map((x) => x.source)} ${context}`,
        );
      }
      const slots = (d.slots ?? []).map((s) => s.slot);
      if (slots.join() !== original.slots.join()) {
        throw new Violation(
          "retry",
          `replayed with slots ${slots}, first ${original.slots} ${context}`,
        );
      }
    }
    // A denial is replayed until its retryAfterMs (docs/request-ids-and-refunds.md), a
    // calendar quota's until the next period, however much room a refund made meanwhile:
    // the denial of a retry whose id was denied before is not judged.
    record(w, isolate.id, requests, d, context, original.allowed && !original.retryDenied);
    if (!d.allowed) original.retryDenied = true;
  }
  toString() {
    return `retry(iso${this.iso}, #${this.pick})`;
  }
}

class Burst implements Step {
  constructor(
    readonly part: Part,
    readonly n: number,
  ) {}
  check(w: World) {
    return w.on("burst") && partsAllowed(w, [this.part]);
  }
  async run(w: World) {
    const r = request(w, this.part);
    const answers = await Promise.all(
      Array.from({ length: this.n }, async (_, i) => {
        const isolate = w.isolate(i % 3);
        return { iso: isolate.id, d: await isolate.limiter.limitAll([r]) };
      }),
    );
    for (const { iso, d } of answers) record(w, iso, [r], d, `${w.when()} (${this})`, false);
    // Judged once every answer is recorded: the store decided them in an order the test
    // cannot see, so a denial is judged against all the burst admitted.
    for (const { iso, d } of answers) checkPeriods(w, iso, [r], d, `${w.when()} (${this})`);
  }
  toString() {
    return `burst(${fmt([this.part])} ×${this.n})`;
  }
}

class Release implements Step {
  constructor(
    readonly iso: number,
    readonly pick: number,
  ) {}
  check(w: World) {
    return w.ref.slots.some((s) => s.state === "held");
  }
  async run(w: World) {
    const ref = w.ref;
    const held = ref.slots.filter((s) => s.state === "held");
    const slot = held[this.pick % held.length] as (typeof held)[number];
    // A slot taken by an isolate's fallback goes back in that isolate (docs/concurrency.md).
    const isolate = slot.local ? w.isolateById(slot.iso) : w.isolate(this.iso);
    if (!isolate) return;
    const live = ref.now < slot.until;
    const out = await isolate.limiter.release(slot.ref);
    ref.next();
    if (out.error !== undefined || out.released.length !== 1) {
      slot.state = "unknown";
      return;
    }
    if (out.released[0]) {
      slot.state = "released";
      return;
    }
    slot.state = "released";
    if (isolate.oldConfig && slot.ref.shard === "C") {
      // An isolate still on the old config (a broken premise: it has no client for the shard
      // the reshard added) cannot reach a slot held there; the slot lapses at its timeout. The
      // promise for a broken premise is the fence's (never over the limit), not this one.
      slot.state = "unknown";
      return;
    }
    if (live) {
      throw new Violation(
        "release",
        `a live slot (taken at ${slot.t - ref.now} ms by isolate ${slot.iso}, shard ${slot.ref.shard}, local ${slot.local}) answered released: false (${this})`,
      );
    }
  }
  toString() {
    return `release(iso${this.iso}, #${this.pick})`;
  }
}

/**
 * Receipts a refund may pick: those of requests with an id only while that meeting is on; one
 * whose window's or period's usage was settled (or may have been) only while refunds×usage-count
 * is; one refunded before (or tried) only while refund-again is.
 */
function refundable(w: World) {
  return w.receipts.filter(
    (r) =>
      (r.id === undefined || w.on("refunds×request-ids")) &&
      (w.on("refund-again") || !r.admissions.some((a) => a.refunded)) &&
      (w.on("refunds×usage-count") ||
        !r.admissions.some(
          (a) =>
            isCounted(a.policy) && (a.settled !== undefined || a.settleUncertain !== undefined),
        )),
  );
}

class Refund implements Step {
  constructor(
    readonly iso: number,
    readonly pick: number,
  ) {}
  check(w: World) {
    return w.on("refunds") && refundable(w).length > 0;
  }
  async run(w: World) {
    const candidates = refundable(w);
    const entry = candidates[this.pick % candidates.length] as (typeof candidates)[number];
    const isolate = w.isolate(this.iso);
    const out = await isolate.limiter.refund(entry.receipt);
    w.ref.next();
    // A refund that failed may have landed: the model forgets the units either way (laxer).
    if (out.refunded || out.error !== undefined) {
      w.ref.recordRefund(entry.admissions, isolate.id, out.error === undefined);
      if (entry.id) entry.id.refunded = true;
    }
  }
  toString() {
    return `refund(iso${this.iso}, #${this.pick})`;
  }
}

class Peek implements Step {
  constructor(
    readonly iso: number,
    readonly part: Part,
  ) {}
  check(w: World) {
    return w.on("peek") && w.reshardAllows("reshard×peek") && partsAllowed(w, [this.part]);
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const r = request(w, this.part);
    let peek: PeekAnswer | undefined;
    let failed = "";
    try {
      peek = await isolate.limiter.peek(r);
    } catch (error) {
      failed = String(error);
    }
    const d = await isolate.limiter.limitAll([r]);
    const source = d.decisions[0]?.source ?? "?";
    const policy = policyOf(r);
    // The log is peeked (or the call fails with its store); any other algorithm is answered as
    // not peeked, naming it, before the store is asked: never an error, and nothing counted (the
    // check right after is judged as any: a calendar rule's denial with room left is one).
    const wrong =
      policy.algorithm === "sliding-log"
        ? peek?.peeked === false
        : peek === undefined || peek.peeked || peek.algorithm !== policy.algorithm;
    if (wrong) {
      throw new Violation(
        "peek",
        `a ${policy.algorithm} rule's peek answered ${failed || JSON.stringify(peek)} (${this})`,
      );
    }
    if (
      peek?.peeked &&
      peek.allowed &&
      !d.allowed &&
      !FAILURE_SOURCES.has(source) &&
      !w.ref.mayRememberStale(policy, r.key, isolate.id)
    ) {
      throw new Violation(
        "peek",
        `peek answered allowed (remaining ${peek.remaining}), the check right after denied (${source}, retry ${d.decisions[0]?.retryAfterMs} ms) (${this})`,
      );
    }
    record(w, isolate.id, [r], d, `${w.when()} (${this})`);
  }
  toString() {
    return `peek+decide(iso${this.iso}, ${fmt([this.part])})`;
  }
}

class Reset implements Step {
  constructor(
    readonly iso: number,
    readonly part: Part,
  ) {}
  check(w: World) {
    return w.on("reset") && this.part.p !== "conc" && partsAllowed(w, [this.part]);
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const r = request(w, this.part);
    const target: ResetRequest = {
      policy: r.policy,
      key: r.key,
      limit: r.limit,
      windowMs: r.windowMs,
      algorithm: policyOf(r).algorithm,
    };
    // A calendar key's reset names its period (its bounds are checked as a decision's).
    if (r.period) target.period = r.period;
    const out = await isolate.limiter.reset(target).catch(() => undefined);
    w.ref.next();
    // A reset that failed may have landed, on either placement: counted as done (laxer).
    w.ref.recordReset(policyOf(r), r.key, isolate.id, out !== undefined);
  }
  toString() {
    return `reset(iso${this.iso}, ${this.part.p}/k${this.part.k})`;
  }
}

class Override implements Step {
  constructor(
    readonly iso: number,
    readonly k: number,
    readonly limit: number | undefined,
  ) {}
  check(w: World) {
    return w.on("overrides") && w.reshardAllows("reshard×plans");
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const key = w.keys[this.k] as string;
    const policy = POLICIES.plan as Policy;
    const change =
      this.limit === undefined
        ? isolate.limiter.overrides.remove("plan", key)
        : isolate.limiter.overrides.set("plan", key, { limit: this.limit });
    const out = await change.catch(() => undefined);
    w.ref.next();
    if (out && !out.ok) throw new Error(`override refused: ${out.field} ${out.detail}`);
    w.ref.recordOverride(policy, key, isolate.id, isolate.oldConfig, this.limit, out !== undefined);
  }
  toString() {
    return `override(iso${this.iso}, k${this.k}, ${this.limit ?? "remove"})`;
  }
}

class Block implements Step {
  constructor(
    readonly iso: number,
    readonly k: number,
    readonly on: boolean,
  ) {}
  check(w: World) {
    return w.on("key-blocks") && w.reshardAllows("reshard×plans");
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const key = w.keys[this.k] as string;
    const target = { policy: "plan", key };
    const change = this.on
      ? isolate.limiter.blocks.add(target)
      : isolate.limiter.blocks.remove(target);
    const out = await change.catch(() => undefined);
    w.ref.next();
    if (out && !out.ok) throw new Error(`block refused: ${out.field} ${out.detail}`);
    w.ref.recordBlock(
      POLICIES.plan as Policy,
      key,
      isolate.id,
      isolate.oldConfig,
      this.on,
      out !== undefined,
    );
  }
  toString() {
    return `${this.on ? "block" : "unblock"}(iso${this.iso}, k${this.k})`;
  }
}

const IPS = ["192.0.2.1", "192.0.2.2", "198.51.100.7"];

class NetBlock implements Step {
  constructor(
    readonly iso: number,
    readonly ip: number,
    readonly on: boolean,
  ) {}
  check(w: World) {
    return w.on("network-blocks");
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const value = IPS[this.ip] as string;
    const change = this.on
      ? isolate.limiter.networks.add({ by: "ip", value })
      : isolate.limiter.networks.remove({ by: "ip", value });
    const out = await change.catch(() => undefined);
    w.ref.next();
    if (out && !out.ok) throw new Error(`network block refused: ${out.field} ${out.detail}`);
    if (this.on && out)
      w.ref.netBlocks.set(value, { t: w.ref.now, iso: isolate.id, removed: false });
    else if (!this.on) w.ref.netBlocks.delete(value);
  }
  toString() {
    return `${this.on ? "net-block" : "net-unblock"}(iso${this.iso}, ${IPS[this.ip]})`;
  }
}

class NetCheck implements Step {
  constructor(
    readonly iso: number,
    readonly ip: number,
  ) {}
  check(w: World) {
    return w.on("network-blocks");
  }
  async run(w: World) {
    const isolate = w.isolate(this.iso);
    const ip = IPS[this.ip] as string;
    // The same options object every time: a copy is kept per options (the callback compared
    // by identity), so each isolate keeps one copy that refreshes as a deployed one does.
    const copy = isolate.limiter.networkBlocks(w.blocksOptions(isolate.id));
    const hit = await copy.match({ ip }, ["log"]);
    w.ref.next();
    const block = w.ref.netBlocks.get(ip);
    const seen = block && (block.iso === isolate.id || w.ref.now - block.t > BLOCKS_REFRESH_MS);
    // A copy whose refresh failed lately decides from the old copy until the next attempt.
    const failed = w.refreshFailedAt.get(isolate.id);
    const fresh = failed === undefined || w.ref.now - failed > 2 * BLOCKS_REFRESH_MS;
    if (block && seen && fresh && w.ref.shardHealthy("A") && !hit) {
      throw new Violation(
        "network-block",
        `${ip} blocked ${w.ref.now - block.t} ms ago by isolate ${block.iso}, not matched by isolate ${isolate.id} (${this})`,
      );
    }
  }
  toString() {
    return `net-check(iso${this.iso}, ${IPS[this.ip]})`;
  }
}

class Fault implements Step {
  constructor(
    readonly shard: number,
    readonly mode: "up" | "down" | "hang",
  ) {}
  check(w: World) {
    if (this.mode === "up") return true;
    if (!w.on("faults") || !w.reshardAllows("reshard×faults")) return false;
    return this.mode !== "hang" || w.on("hang");
  }
  async run(w: World) {
    const store = w.stores[this.shard];
    if (!store) return;
    store.proxy.set(this.mode);
    w.ref.faults.set(store.name, { mode: this.mode, since: w.ref.now });
    if (this.mode !== "up") w.ref.wasOut.add(store.name);
    w.ref.next();
  }
  toString() {
    return `store ${SHARDS[this.shard]} ${this.mode}`;
  }
}

class Advance implements Step {
  constructor(readonly ms: number) {}
  check() {
    return true;
  }
  async run(w: World) {
    w.advance(this.ms);
  }
  toString() {
    return `clock +${this.ms}`;
  }
}

/** A clock step to just around the reshard's instant or the end of its settle interval. */
class ToInstant implements Step {
  constructor(readonly offset: number) {}
  check(w: World) {
    return w.at !== undefined && w.at + this.offset > w.now();
  }
  async run(w: World) {
    if (w.at !== undefined && w.at + this.offset > w.now()) w.advance(w.at + this.offset - w.now());
  }
  toString() {
    return `clock to at${this.offset >= 0 ? "+" : ""}${this.offset}`;
  }
}

const USAGE = ["usage", "umonth", "ufixed"];
const RATE = ["log", "ring", "plan", "lease", "fixed", "counter", "bucket", ...CALENDAR, ...USAGE];
/** Peeked: the logs (peeked), and the calendar and usage rules (answered as not peeked). */
const PEEKABLE = ["log", "ring", "plan", "lease", ...CALENDAR, ...USAGE];
const iso = fc.integer({ min: 0, max: 2 });
const key = fc.integer({ min: 0, max: 3 });
const pick = fc.nat({ max: 1_000 });
const ip = fc.integer({ min: 0, max: IPS.length - 1 });

/**
 * Every step whose features are on, weighted by repetition (a step switched off is not
 * generated at all, so a narrow MODEL_ONLY run spends its steps on what it aims at; `check`
 * still leaves out the meetings switched off, which depend on the run).
 */
export function steps(features: ReadonlySet<Feature>): fc.Arbitrary<Step>[] {
  const on = (f: Feature) => features.has(f);
  const rate = RATE.filter((p) => policyOn(features, p));
  const peekable = PEEKABLE.filter((p) => rate.includes(p));
  const cost = on("costs") ? fc.integer({ min: 1, max: 3 }) : fc.constant(1);
  const part = (names: string[]) => fc.record({ p: fc.constantFrom(...names), k: key, c: cost });
  const out: fc.Arbitrary<Step>[] = [];
  const add = (times: number, arb: fc.Arbitrary<Step>) => {
    for (let n = 0; n < times; n++) out.push(arb);
  };
  const any = [...rate, ...(on("concurrency") ? ["conc"] : [])];
  if (any.length > 0) {
    const parts = fc.array(part(any), { minLength: 1, maxLength: on("multi-policy") ? 2 : 1 });
    add(
      4,
      fc.tuple(iso, parts, fc.boolean()).map(([i, ps, id]) => new Decide(i, ps, id)),
    );
  }
  if (on("concurrency")) {
    const acquire = fc
      .tuple(iso, key, fc.boolean())
      .map(([i, k, id]) => new Decide(i, [{ p: "conc", k, c: 1 }], id));
    add(2, acquire);
    add(
      2,
      fc.tuple(iso, pick).map(([i, p]) => new Release(i, p)),
    );
    if (on("burst")) {
      add(
        1,
        fc.tuple(part(["conc"]), fc.integer({ min: 2, max: 6 })).map(([p, n]) => new Burst(p, n)),
      );
    }
  }
  if (on("request-ids"))
    add(
      2,
      fc.tuple(iso, pick).map(([i, p]) => new Retry(i, p)),
    );
  if (on("burst") && rate.length > 0) {
    add(
      1,
      fc.tuple(part(rate), fc.integer({ min: 2, max: 8 })).map(([p, n]) => new Burst(p, n)),
    );
  }
  if (on("peek") && peekable.length > 0) {
    add(
      2,
      fc.tuple(iso, part(peekable)).map(([i, p]) => new Peek(i, p)),
    );
  }
  if (on("refunds"))
    add(
      1,
      fc.tuple(iso, pick).map(([i, p]) => new Refund(i, p)),
    );
  if (on("reset") && rate.length > 0) {
    add(
      1,
      fc.tuple(iso, part(rate)).map(([i, p]) => new Reset(i, p)),
    );
  }
  if (on("overrides")) {
    const limit = fc.option(fc.integer({ min: 0, max: 8 }), { nil: undefined });
    add(
      1,
      fc.tuple(iso, key, limit).map(([i, k, l]) => new Override(i, k, l)),
    );
  }
  const anchored = CALENDAR.filter((p) => rate.includes(p));
  if (on("anchors") && anchored.length > 0) {
    const anchor = fc.option(fc.nat({ max: ANCHORS.length - 1 }), { nil: undefined, freq: 4 });
    // The largest cost is 3: a limit below it only with anchors×below-cost (features.ts).
    const limit = fc.integer({ min: on("anchors×below-cost") ? 1 : 3, max: 8 });
    const set = fc.tuple(iso, fc.constantFrom(...anchored), key, anchor, limit);
    add(
      2,
      set.map(([i, p, k, a, l]) => new Anchor(i, p, k, a, l)),
    );
  }
  if (on("key-blocks")) {
    add(
      1,
      fc.tuple(iso, key, fc.boolean()).map(([i, k, b]) => new Block(i, k, b)),
    );
  }
  if (on("network-blocks")) {
    add(
      1,
      fc.tuple(iso, ip, fc.boolean()).map(([i, n, b]) => new NetBlock(i, n, b)),
    );
    add(
      1,
      fc.tuple(iso, ip).map(([i, n]) => new NetCheck(i, n)),
    );
  }
  if (on("faults")) {
    const mode = on("hang")
      ? fc.constantFrom("down" as const, "down" as const, "hang" as const)
      : fc.constant("down" as const);
    add(
      1,
      fc.tuple(fc.integer({ min: 0, max: 2 }), mode).map(([s, m]) => new Fault(s, m)),
    );
    add(
      2,
      fc.integer({ min: 0, max: 2 }).map((s) => new Fault(s, "up")),
    );
  }
  const steps = fc.constantFrom(1, 100, 499, 1_000, 1_600, 3_000, 6_000, 10_000, 16_000);
  add(
    1,
    steps.map((ms) => new Advance(ms)),
  );
  add(
    1,
    fc.constantFrom(1, 250, 2_500, 5_000).map((ms) => new Advance(ms)),
  );
  if (on("calendar")) {
    const parts = fc.array(part(CALENDAR), { minLength: 1, maxLength: on("multi-policy") ? 2 : 1 });
    add(
      2,
      fc.tuple(iso, parts, fc.boolean()).map(([i, ps, id]) => new Decide(i, ps, id)),
    );
    // A calendar usage rule's month is stepped to its edges too.
    const edges = [...CALENDAR, ...rate.filter((p) => p === "umonth")];
    const edge = fc.tuple(
      fc.constantFrom(...edges),
      fc.constantFrom(0, ...PERIODS_ON),
      fc.constantFrom(...EDGE_OFFSETS),
      // A key's own period's edges too, once anchors are set (the same as the rule's without).
      on("anchors") ? fc.option(key, { nil: undefined }) : fc.constant(undefined),
    );
    add(
      2,
      edge.map(([p, n, o, k]) => new ToPeriodEdge(p, n, o, p === "umonth" ? undefined : k)),
    );
  }
  if (on("usage")) {
    // A usage part, alone or beside any other (its receipt then settles the usage part only).
    const others = fc.array(part(any), { maxLength: on("multi-policy") ? 1 : 0 });
    const reserve = fc.tuple(
      iso,
      part(USAGE.filter((p) => rate.includes(p))),
      others,
      fc.boolean(),
    );
    add(
      2,
      reserve.map(([i, u, ps, id]) => new Decide(i, [u, ...ps], id)),
    );
    const tenths = fc.integer({ min: 0, max: 20 });
    const settle = fc.tuple(iso, pick, tenths, fc.boolean(), fc.nat({ max: 4 }));
    add(
      2,
      settle.map(([i, p, t, twice, any]) => new Settle(i, p, t, twice, any === 0)),
    );
  }
  if (on("reshard")) {
    const offsets = [-1_000, -1, 0, TIMEOUT_MS - 1, TIMEOUT_MS, TIMEOUT_MS + 1, TIMEOUT_MS + 2_000];
    add(
      2,
      fc.constantFrom(...offsets).map((o) => new ToInstant(o)),
    );
  }
  return out;
}

function parsePart(text: string): Part {
  const m = /^([a-z]+)\/k(\d+)(?:×(\d+))?$/.exec(text.trim());
  if (!m) throw new Error(`not a step's part: ${text}`);
  return { p: m[1] as string, k: Number(m[2]), c: Number(m[3] ?? 1) };
}

/**
 * A step from its `toString()`: a shrunk sequence, as the fuzz prints it, is kept as text
 * (model/kept-seeds.json) and replayed step by step, whatever the generators become.
 */
export function parseStep(text: string): Step {
  const call = /^([a-z+-]+)\((.*)\)$/.exec(text.trim());
  if (call) {
    const [, name, body] = call as unknown as [string, string, string];
    const args = body.split(", ");
    const isoOf = (arg: string | undefined) =>
      Number(/^iso(\d)$/.exec(arg ?? "")?.[1] ?? Number.NaN);
    const num = (arg: string | undefined) => Number((arg ?? "").replace(/^[#k]/, ""));
    switch (name) {
      case "decide":
        return new Decide(
          isoOf(args[0]),
          (args[1] ?? "").split("+").map(parsePart),
          args[2] === "id",
        );
      case "retry":
        return new Retry(isoOf(args[0]), num(args[1]));
      case "burst": {
        const m = /^(\S+) ×(\d+)$/.exec(body) as RegExpExecArray;
        return new Burst(parsePart(m[1] as string), Number(m[2]));
      }
      case "release":
        return new Release(isoOf(args[0]), num(args[1]));
      case "refund":
        return new Refund(isoOf(args[0]), num(args[1]));
      case "peek+decide":
        return new Peek(isoOf(args[0]), parsePart(args[1] ?? ""));
      case "reset":
        return new Reset(isoOf(args[0]), parsePart(args[1] ?? ""));
      case "override":
        return new Override(
          isoOf(args[0]),
          num(args[1]),
          args[2] === "remove" ? undefined : num(args[2]),
        );
      case "block":
      case "unblock":
        return new Block(isoOf(args[0]), num(args[1]), name === "block");
      case "net-block":
      case "net-unblock":
        return new NetBlock(isoOf(args[0]), IPS.indexOf(args[1] ?? ""), name === "net-block");
      case "net-check":
        return new NetCheck(isoOf(args[0]), IPS.indexOf(args[1] ?? ""));
    }
  }
  const own = parsePeriodOrSettle(text.trim()) ?? parseAnchor(text.trim());
  if (own) return own;
  const store = /^store ([A-C]) (up|down|hang)$/.exec(text.trim());
  if (store) {
    return new Fault(SHARDS.indexOf(store[1] as "A"), store[2] as "up" | "down" | "hang");
  }
  const clock = /^clock \+(\d+)$/.exec(text.trim());
  if (clock) return new Advance(Number(clock[1]));
  const instant = /^clock to at([+-]\d+)$/.exec(text.trim());
  if (instant) return new ToInstant(Number(instant[1]));
  throw new Error(`not a model step: ${JSON.stringify(text)}`);
}
