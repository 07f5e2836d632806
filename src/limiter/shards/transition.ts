/**
 * A moved key's decision during a reshard's transition (docs/shards.md "Reshard", steps 2 and
 * 3 of sharded-limiter.ts's note): the requests as the new shard must decide them, with the
 * old shard's count taken off the limit and the key's plan read by the router, or the answer
 * when no store call can admit them.
 */
import { isLogAlgorithm } from "../../store/algorithm";
import { withDeadline } from "../../store/with-deadline";
import { blockedRequest, denied, fromCache, notAsked } from "../decisions";
import { planOf } from "../plan-changes";
import { type ResolvedPolicy, resolvePolicies } from "../resolved-policy";
import type { FailMode, LimitAllOptions, LimitRequest, MultiDecision } from "../types";
import type { ShardFence } from "./fence";
import type { MovedKeyCounts } from "./moved-key-counts";
import type { Router } from "./router";
import type { Shard, Shards } from "./shard";

/** What the new shard decides: the adjusted requests and, per request, the limit to report. */
export type Adjusted =
  | { decided: MultiDecision }
  | { requests: LimitRequest[]; limits: (number | undefined)[] };

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
   * A moved key's override and block during its transition: the new shard's, else the old
   * one's, which is then copied to the new shard (off the request path) so that it stays with
   * the key once the old placement is forgotten. Undefined when a shard did not answer.
   */
  async function movedPlan(
    to: Shard,
    old: Shard,
    request: LimitRequest,
    limitOptions: LimitAllOptions,
  ): Promise<Awaited<ReturnType<typeof planOf>> | undefined> {
    const target = { policy: request.policy, key: request.key };
    try {
      const fresh = await withDeadline(timeoutMs, () => planOf(to.ctx, target));
      if (fresh.limit !== undefined || fresh.blockedUntil !== undefined) return fresh;
      const kept = await withDeadline(timeoutMs, () => planOf(old.ctx, target));
      const copies: Promise<unknown>[] = [];
      if (kept.limit !== undefined) {
        copies.push(
          to.limiter.overrides.set(request.policy, request.key, {
            limit: kept.limit,
            algorithm: request.algorithm,
          }),
        );
      }
      if (kept.blockedUntil !== undefined) {
        const seconds =
          kept.blockedUntil === 0 ? undefined : Math.ceil((kept.blockedUntil - kept.now) / 1000);
        if (seconds === undefined || seconds >= 1) {
          copies.push(to.limiter.blocks.add(target, seconds === undefined ? {} : { seconds }));
        }
      }
      if (copies.length > 0) {
        const copied = Promise.allSettled(copies);
        limitOptions.waitUntil?.(copied);
      }
      return kept;
    } catch (error) {
      old.ctx.onStoreError?.(error);
      return undefined;
    }
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
      own.map(async (request, j) => {
        const old = from[j];
        if (old === undefined) return { request, limit: undefined };
        const oldShard = shards.list[old] as Shard;
        let limit = request.limit;
        if (request.overrides === true) {
          const plan = await movedPlan(shard, oldShard, request, limitOptions);
          if (plan === undefined) return { failed: oldShard };
          if (plan.blockedUntil !== undefined) {
            return { blockedUntil: plan.blockedUntil, storeNow: plan.now };
          }
          limit = plan.limit ?? limit;
        }
        const cost = request.cost ?? 1;
        const adjusted = { ...request, lease: false, overrides: false };
        if (!isLogAlgorithm(request.algorithm ?? "sliding-log")) {
          // Counters start afresh on the new shard (see sharded-limiter.ts's note).
          return limit < cost
            ? { short: limit, retryAt: t + request.windowMs }
            : { request: { ...adjusted, limit }, limit };
        }
        if (limit < cost) return { short: limit, retryAt: t + request.windowMs };
        // The old placement closed there first (fence.ts): the count read after it only falls.
        const closed = await fence.close(oldShard);
        if (closed === "failed") return { failed: oldShard };
        if (closed !== "closed") return { refused: closed, by: oldShard };
        const count = await counts.read(
          old,
          oldShard.ctx,
          { ...request, key: keys[j] as string, limit },
          router.transitionEnd(request.windowMs),
        );
        if (!count) return { failed: oldShard };
        const left = limit - count.used;
        if (left < cost)
          return { short: Math.max(0, left), retryAt: Math.max(t + 1, count.retryAt) };
        return { request: { ...adjusted, limit: left }, limit };
      }),
    );
    const failed = read.find((r) => "failed" in r);
    if (failed && "failed" in failed) {
      return { decided: shards.degradedOn(failed.failed)(policies()) };
    }
    const refused = read.find((r) => "refused" in r);
    if (refused && "refused" in refused) {
      return { decided: fence.refused(refused.by as Shard, policies(), refused.refused, t) };
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

  return { adjustMoved };
}
