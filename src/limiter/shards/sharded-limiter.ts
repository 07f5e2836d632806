/**
 * A limiter over several stores (docs/shards.md): one store limiter per shard (its own store,
 * breaker, clock policy, leases), all sharing one denial cache and one fallback limiter, behind
 * a router. Each client key lives on one shard (placement.ts, asked through router.ts), so every rule of one key is
 * still one atomic script; a request whose rules' keys live on several shards is decided on
 * each in parallel, all or nothing (a part admitted where another denied is refunded).
 *
 * The reshard, and why it stays exact. Options name the shards before (`reshard.from`) and the
 * instant `at`. Write Δ for the limiter's timeoutMs (a store answer later than Δ is never used:
 * the decision has gone to its failure policy) and A for STAMP_AHEAD_MAX_MS (the furthest
 * ahead a lease stamps its units). For a key whose shard changes (old O, new N):
 *
 * 1. Before `at` (isolate clock) it is decided on O, as before.
 * 2. In [at, at + Δ) it is denied (retry at at + Δ), counting nothing anywhere. Every isolate
 *    runs these options before `at` (the deployment's premise), so every call deciding the key
 *    on O was sent before `at`, and any whose answer was used ran on O before at + Δ. After
 *    at + Δ, O admits nothing more for the key: its live count u_O only falls from then on.
 *    The premise is not taken on trust (fence.ts): O refuses the old placement once an isolate
 *    on the new one has closed it there, which each does before it first reads O's count, so
 *    u_O only falls from that read on whatever a stale isolate, its clock or its `at` says.
 * 3. From at + Δ until at + Δ + A + w (w: the policy's window), a sliding-log policy is decided
 *    on N with the limit L - u, where u is u_O read by a peek of O (moved-key-counts.ts) sent
 *    after at + Δ. Since u_O only falls, u ≥ u_O at the decision, and N admits a cost c only
 *    when n_N + c ≤ L - u, so n_N + u_O + c ≤ L: the key's two logs together, which are all of
 *    its admissions in the window, never pass L. The decision reports the real limit L;
 *    `remaining` (L - u - n_N - c) is exact while u is. Leases and regions are off for the key
 *    (only N's store decides it), and its override and block are read by the router
 *    (N's, else O's, copied to N), since the script would read them in place of L - u.
 * 4. After at + Δ + A + w every admission O holds for the key was stamped before at + Δ + A, so
 *    it has left the window: u_O = 0 and O is forgotten for that policy.
 *
 * Concurrency the same way, its window the slot timeout: N takes a slot only when
 * n_N + 1 ≤ L - s, s the live slots O holds for the key read after at + Δ (O takes none after
 * it, so they only fall), and O's last slots lapse by at + Δ + timeout.
 *
 * Costs: the peek (one read-only script) only for moved keys in the transition, once per key
 * and policy until the next of u's units leaves the window (u = 0: once); a concurrency key's
 * old slots are read at each of its decisions until O holds none. The other algorithms (O(1)
 * counters, not logs: nothing to peek) start afresh on N at at + Δ: one window in which a
 * moved key may get its limit once more, the slack fixed-window already has at a boundary.
 */
import { isLogAlgorithm } from "../../store/algorithm";
import { DEFAULT_LIMITER_TIMEOUT_MS } from "../defaults";
import type { Limiter } from "../limiter-api";
import type { LimiterOptions } from "../limiter-options";
import type { CountedReceipt } from "../receipt-state";
import type { MultiDecision } from "../types";
import { createShardedDecide } from "./decide";
import { createShardFence, placementViews } from "./fence";
import { createMovedKeyCounts } from "./moved-key-counts";
import type { ShardLayout } from "./options";
import { createShardedPlans } from "./plans";
import { refundParts } from "./refund";
import { createRouter } from "./router";
import { settleParts } from "./settle";
import { type BuildStoreLimiter, buildShards, type Shard } from "./shard";
import { createShardedSlots } from "./slots";
import { createTransition } from "./transition";
import type { ShardPlacement } from "./types";

export function createShardedLimiter(
  options: LimiterOptions,
  layout: ShardLayout,
  build: BuildStoreLimiter,
): Limiter {
  const now = options.now ?? Date.now;
  const timeoutMs = options.timeoutMs ?? DEFAULT_LIMITER_TIMEOUT_MS;
  const router = createRouter(layout, timeoutMs);
  const shards = buildShards(options, layout, build, placementViews(layout, router));
  const counts = createMovedKeyCounts(now);
  const fence = createShardFence(layout, shards, router);
  const transition = createTransition({
    failMode: options.failMode,
    timeoutMs,
    shards,
    router,
    counts,
    fence,
  });
  const limitAll = createShardedDecide(options, shards, router, transition, fence);
  const slots = createShardedSlots(shards, router, now);
  const plans = createShardedPlans({
    names: layout.names,
    limiters: shards.list.map((shard) => shard.limiter),
    targets: (key) => router.holders(key, now()),
  });
  const first = shards.list[0] as Shard;
  const shardFor = (key: unknown) =>
    shards.list[typeof key === "string" ? router.route(key, now()).to : 0] as Shard;

  return {
    async limit(request, limitOptions) {
      const { decisions } = await limitAll([request], {
        ...(limitOptions?.waitUntil ? { waitUntil: limitOptions.waitUntil } : {}),
        ...(limitOptions?.region !== undefined ? { region: limitOptions.region } : {}),
      });
      return decisions[0] as MultiDecision["decisions"][number];
    },
    limitAll,
    async refund(receipt, refundOptions) {
      const counted = receipt as CountedReceipt;
      const named =
        typeof counted?.shard === "string" ? shards.byName.get(counted.shard) : undefined;
      // A receipt that names no shard: the one its key lives on now (or the first, which
      // answers a receipt it cannot read as one store does).
      const outcome = Array.isArray(counted?.parts)
        ? await refundParts(
            counted,
            refundOptions?.policies,
            (name) => shards.byName.get(name)?.limiter,
          )
        : await (named ?? shardFor(counted?.resolved?.[0]?.clientKey)).limiter.refund(
            receipt,
            refundOptions,
          );
      // Units given back on a moved key's old shard lower the count this isolate remembers of
      // it: remembered on, it would hold the key's limit down until that count's next unit left
      // the window (an upper bound: safe, but a refund that frees nothing). Read afresh.
      if (outcome.refunded && now() < router.endsBy) counts.clear();
      return outcome;
    },
    settle(receipt, units) {
      const counted = receipt as CountedReceipt;
      if (Array.isArray(counted?.parts)) {
        return settleParts(counted, units, (name) => shards.byName.get(name)?.limiter);
      }
      // On the shard that admitted it (its entries are there), as a refund is.
      const named =
        typeof counted?.shard === "string" ? shards.byName.get(counted.shard) : undefined;
      return (named ?? shardFor(counted?.resolved?.[0]?.clientKey)).limiter.settle(receipt, units);
    },
    async endLeases() {
      await Promise.all(shards.list.map((shard) => shard.limiter.endLeases()));
    },
    forget(request) {
      counts.clear();
      for (const shard of shards.list) shard.limiter.forget(request);
    },
    async peek(request) {
      // A moved key's log as its decision sees it: the old shard's count and plan included.
      const t = now();
      const { key, windowMs, algorithm } = request ?? {};
      if (
        typeof key === "string" &&
        typeof windowMs === "number" &&
        isLogAlgorithm(algorithm ?? "sliding-log")
      ) {
        const from = router.movedFrom(key, windowMs, t);
        const to = shards.list[router.route(key, t).to] as Shard;
        if (from !== undefined) return transition.peekMoved(to, request, from, t);
      }
      const shard = shardFor(key);
      const peeked = await shard.limiter.peek(request);
      if (peeked.peeked) peeked.shard = shard.name;
      return peeked;
    },
    async reset(request) {
      // Both placements while a reshard may hold the key's count on its old shard.
      const targets = router.holders(request?.key, now());
      counts.clear();
      const outcomes = await Promise.all(
        targets.map((index) => (shards.list[index] as Shard).limiter.reset(request)),
      );
      return {
        existed: outcomes.some((outcome) => outcome.existed),
        regionsFailed: outcomes.flatMap((outcome) => outcome.regionsFailed),
      };
    },
    overrides: plans.overrides,
    blocks: plans.blocks,
    networks: first.limiter.networks,
    plans: plans.plans,
    networkBlocks: (blockOptions) => first.limiter.networkBlocks(blockOptions),
    shards: () =>
      shards.list.map((shard, i) => ({
        name: shard.name,
        breaker: shard.ctx.breaker.state,
        placed: i < layout.placed,
        previous: layout.reshard?.from.includes(shard.name) ?? false,
      })),
    placement: (t = now()): ShardPlacement => router.placement(t),
    shardOf: (key, t = now()) => (shards.list[router.route(key, t).to] as Shard).name,
    release: slots.release,
    inFlight: slots.inFlight,
  };
}
