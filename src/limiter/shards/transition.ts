/**
 * A moved key's decision during a reshard's transition (docs/shards.md "Reshard", steps 2 and
 * 3 of sharded-limiter.ts's note): the requests as the new shard must decide them, with the
 * old shard's count taken off the limit and the key's plan read by the router (moved-plan.ts),
 * or the answer when no store call can admit them.
 */
import { boundedKey } from "../../bounded-key";
import { isConcurrency, isLogAlgorithm } from "../../store/algorithm";
import type { FenceRefusal } from "../../store/placement-fence";
import { blockedRequest, denied, fromCache, notAsked } from "../decisions";
import type { Peek } from "../peek";
import { type ResolvedPolicy, type RoutedRequest, resolvePolicies } from "../resolved-policy";
import type { Decision, FailMode, LimitAllOptions, LimitRequest, MultiDecision } from "../types";
import type { ShardFence } from "./fence";
import type { MovedKeyCounts } from "./moved-key-counts";
import { movedPlan } from "./moved-plan";
import type { Router } from "./router";
import type { Shard, Shards } from "./shard";

/** A full set's Retry-After, as the store answers it: a slot frees whenever a holder ends. */
const CONCURRENCY_RETRY_MS = 1_000;

/** What the new shard decides: the adjusted requests and, per request, the limit to report. */
type Adjusted =
  | { decided: MultiDecision }
  | { requests: LimitRequest[]; limits: (number | undefined)[] };

/** One moved request: as the new shard decides it, or why no store call can admit it. */
type OneAdjusted =
  | { request: LimitRequest; limit: number | undefined }
  | { short: number; retryAt: number }
  | { blockedUntil: number; storeNow: number }
  | { failed: Shard }
  | { refused: FenceRefusal; by: Shard };

export interface Transition {
  /**
   * Moved keys' requests (`from[j]` the shard request j moved from, else undefined) as `shard`
   * must decide them, or the group's answer when no store call can admit it (the settle
   * interval, a block, an old count that leaves less than the cost, an old shard that cannot
   * be read). `keys`: the keys as counted (digested past MAX_KEY_LENGTH).
   */
  adjustMoved(
    shard: Shard,
    own: readonly LimitRequest[],
    keys: readonly string[],
    from: readonly (number | undefined)[],
    t: number,
    limitOptions: LimitAllOptions,
  ): Promise<Adjusted>;
  /**
   * A peek of a moved key's log policy (`old` the shard it moved from) as the decision would
   * answer it at `t`: the same settle interval, plan, old count and reduced limit. Rejects when
   * a shard did not answer, as a peek does.
   */
  peekMoved(shard: Shard, request: LimitRequest, old: number, t: number): Promise<Peek>;
}

export interface TransitionOptions {
  failMode: FailMode | undefined;
  timeoutMs: number;
  shards: Shards;
  router: Router;
  counts: MovedKeyCounts;
  fence: ShardFence;
}

export function createTransition(options: TransitionOptions): Transition {
  const { timeoutMs, shards, router, counts, fence } = options;
  const failMode = options.failMode ?? "open";

  /**
   * The old placement closed on the old shard before its count is read there (fence.ts): the
   * count then only falls. Undefined once closed; else why the read cannot go on.
   */
  async function closeOld(oldShard: Shard): Promise<OneAdjusted | undefined> {
    const closed = await fence.close(oldShard);
    if (closed === "closed") return undefined;
    if (closed === "failed") return { failed: oldShard };
    return { refused: closed, by: oldShard };
  }

  async function adjustOne(
    shard: Shard,
    request: LimitRequest,
    key: string,
    old: number,
    t: number,
    limitOptions: Pick<LimitAllOptions, "waitUntil">,
  ): Promise<OneAdjusted> {
    const oldShard = shards.list[old] as Shard;
    let limit = request.limit;
    if (request.overrides === true) {
      const plan = await movedPlan(shard, oldShard, request, timeoutMs, limitOptions);
      if (plan === undefined) return { failed: oldShard };
      if (plan.blockedUntil !== undefined) {
        return { blockedUntil: plan.blockedUntil, storeNow: plan.now };
      }
      limit = plan.limit ?? limit;
    }
    const cost = request.cost ?? 1;
    // A request id's record is fingerprinted with the asked limit, not the one derived here
    // (from an override, less the old shard's count, which falls with time): a retry asks the
    // same and is replayed.
    const adjusted: RoutedRequest = {
      ...request,
      lease: false,
      overrides: false,
      askedLimit: request.limit,
    };
    if (isConcurrency(request.algorithm ?? "sliding-log")) {
      // The old shard's live slots count (it takes none after the settle instant).
      if (limit < cost) return { short: limit, retryAt: t + CONCURRENCY_RETRY_MS };
      const closed = await closeOld(oldShard);
      if (closed) return closed;
      const held = await counts.slots(
        old,
        oldShard.ctx,
        { ...request, key: key },
        router.transitionEnd(request.windowMs),
      );
      if (held === undefined) return { failed: oldShard };
      const left = limit - held;
      if (left < cost) return { short: Math.max(0, left), retryAt: t + CONCURRENCY_RETRY_MS };
      return { request: { ...adjusted, limit: left }, limit };
    }
    if (!isLogAlgorithm(request.algorithm ?? "sliding-log")) {
      // Counters start afresh on the new shard (see sharded-limiter.ts's note).
      return limit < cost
        ? { short: limit, retryAt: t + request.windowMs }
        : { request: { ...adjusted, limit }, limit };
    }
    if (limit < cost) return { short: limit, retryAt: t + request.windowMs };
    const closed = await closeOld(oldShard);
    if (closed) return closed;
    const count = await counts.read(
      old,
      oldShard.ctx,
      { ...request, key: key, limit },
      router.transitionEnd(request.windowMs),
    );
    if (!count) return { failed: oldShard };
    const left = limit - count.used;
    if (left < cost) return { short: Math.max(0, left), retryAt: Math.max(t + 1, count.retryAt) };
    return { request: { ...adjusted, limit: left }, limit };
  }

  async function adjustMoved(
    shard: Shard,
    own: readonly LimitRequest[],
    keys: readonly string[],
    from: readonly (number | undefined)[],
    t: number,
    limitOptions: LimitAllOptions,
  ): Promise<Adjusted> {
    const policies = (): ResolvedPolicy[] =>
      resolvePolicies(
        "limit",
        own.map((request, j) => ({ ...request, key: keys[j] as string })),
        failMode,
      );
    if (t < router.settledAt) {
      // Step 2: the old shard's last answers may still be landing.
      const until = router.settledAt;
      return {
        decided: denied(
          policies().map((policy, j) =>
            from[j] === undefined
              ? notAsked(policy, t)
              : fromCache(policy, { minCost: 1, remaining: 0, until }, t),
          ),
        ),
      };
    }
    const read = await Promise.all(
      own.map((request, j) => {
        const old = from[j];
        if (old === undefined) return { request, limit: undefined };
        return adjustOne(shard, request, keys[j] as string, old, t, limitOptions);
      }),
    );
    const failed = read.find((r) => "failed" in r);
    if (failed && "failed" in failed) {
      const holder = failed.failed;
      const decided = shards.degradedOn(holder)(policies());
      // Its slots are taken in the failed shard's local store: their release goes there.
      for (const decision of decided.decisions) {
        if (decision.slot) decision.slot.shard = holder.name;
      }
      for (const slot of decided.slots ?? []) slot.shard = holder.name;
      return { decided };
    }
    const refused = read.find((r) => "refused" in r);
    if (refused && "refused" in refused) {
      return { decided: fence.refused(refused.by, policies(), refused.refused, t) };
    }
    const blocked = read.findIndex((r) => "blockedUntil" in r);
    if (blocked >= 0) {
      const hit = read[blocked] as { blockedUntil: number; storeNow: number };
      const waitMs = hit.blockedUntil === 0 ? 0 : Math.max(1, hit.blockedUntil - hit.storeNow);
      return { decided: blockedRequest(policies(), blocked, t, waitMs) };
    }
    if (read.some((r) => "short" in r)) {
      return {
        decided: denied(
          policies().map((policy, j) => {
            const r = read[j];
            return r && "short" in r
              ? fromCache(policy, { minCost: 1, remaining: r.short, until: r.retryAt ?? t + 1 }, t)
              : notAsked(policy, t);
          }),
        ),
      };
    }
    const ok = read as { request: LimitRequest; limit: number | undefined }[];
    return { requests: ok.map((r) => r.request), limits: ok.map((r) => r.limit) };
  }

  async function peekMoved(
    shard: Shard,
    request: LimitRequest,
    old: number,
    t: number,
  ): Promise<Peek> {
    // Checked as a peek checks it (PolicyBoundsError), on the key as counted.
    const key = await boundedKey(request.key);
    const [policy] = resolvePolicies("peek", [{ ...request, key }], failMode);
    if (!policy) throw new TypeError("peek: no policy");
    const answer = (decision: Decision, blocked?: true): Peek => ({
      ...decision,
      peeked: true,
      shard: shard.name,
      ...(blocked ? { blocked } : {}),
    });
    if (t < router.settledAt) {
      return answer(fromCache(policy, { minCost: 1, remaining: 0, until: router.settledAt }, t));
    }
    const one = await adjustOne(shard, request, key, old, t, {});
    if ("failed" in one) {
      throw new Error(
        `peek: shard "${one.failed.name}", where the key lived before, did not answer`,
      );
    }
    if ("refused" in one) {
      // Denied as the check would be: the shard refused this isolate's placement.
      return answer(fence.refused(one.by, [policy], one.refused, t).decisions[0] as Decision);
    }
    if ("blockedUntil" in one) {
      const waitMs = one.blockedUntil === 0 ? 0 : Math.max(1, one.blockedUntil - one.storeNow);
      const [blocked] = blockedRequest([policy], 0, t, waitMs).decisions;
      return answer(blocked as Decision, true);
    }
    if ("short" in one) {
      return answer(fromCache(policy, { minCost: 1, remaining: one.short, until: one.retryAt }, t));
    }
    const peeked = await shard.limiter.peek(one.request);
    if (peeked.peeked) {
      // The real limit, not the one reduced by the old shard's count (remaining is exact).
      if (one.limit !== undefined) peeked.limit = one.limit;
      peeked.shard = shard.name;
    }
    return peeked;
  }

  return { adjustMoved, peekMoved };
}
