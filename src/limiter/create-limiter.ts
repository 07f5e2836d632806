/**
 * src/limiter/: one request decided against its policies, all or nothing, and its refund. This
 * folder owns everything between a LimitRequest and a Decision that is not Redis: resolving the
 * request once (resolved-policy.ts), the denial cache, single flight, the circuit breaker, the
 * degraded path with its local fallback limiter (degraded.ts, fallback-limiter.ts), the clock
 * policy (clock-policy.ts), every Decision builder (decisions.ts) and the refund of a receipt
 * (refund-receipt.ts), and what else is done to a limiter's keys (peek.ts, reset.ts,
 * plan-changes.ts, plan-listing.ts, network-block-copies.ts); context.ts holds what lives as
 * long as the limiter. Its public types are in types.ts. It may import store/, net/ (the
 * copy of the network blocks it hands out is built and matched there) and the leaf files of
 * src/; nothing above it (npm run lint enforces the layers: docs/development.md "Layout").
 *
 * This file: createLimiter, the entry: one store's limiter (store-limiter.ts), or several
 * shards behind a router (shards/sharded-limiter.ts).
 */
import type { Limiter } from "./limiter-api";
import type { LimiterOptions, StoreLimiterOptions } from "./limiter-options";
import { shardLayout } from "./shards/options";
import { createShardedLimiter } from "./shards/sharded-limiter";
import { buildStoreLimiter } from "./store-limiter";

/**
 * The limiter: decides `limit` / `limitAll` requests against the store, exactly, with the denial
 * cache, the breaker and the fallback around it. Build one per isolate and keep it: its caches
 * outlive a request.
 *
 * @example
 * ```ts
 * const limiter = createLimiter({ store: createStoreClient({ url, token }) });
 * const decision = await limiter.limit({
 *   policy: "api", key: userId, limit: 100, windowMs: 60_000,
 * });
 * if (!decision.allowed) return c.text("slow down", 429);
 * await limiter.overrides.set("api", userId, { limit: 10_000 }); // on the same prefix and store
 * ```
 */
export function createLimiter(options: LimiterOptions): Limiter {
  // Bad shards or reshard options throw here, naming the field (shards/options.ts).
  const layout = shardLayout(options.store, options.reshard);
  if (layout.single) {
    const { reshard: _, ...single } = options;
    return buildStoreLimiter({
      ...single,
      store: layout.clients[0] as StoreLimiterOptions["store"],
    }).limiter;
  }
  // Several shards: one limiter per shard behind a router (shards/sharded-limiter.ts).
  return createShardedLimiter(options, layout, buildStoreLimiter);
}
