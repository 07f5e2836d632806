/**
 * An isolate's copy of the network blocks (rules/network-blocks.ts) loaded from a store
 * (store/plans.ts): what the worker builds per isolate, and what an app hands the middleware.
 */
import { DEFAULT_LIMITER_TIMEOUT_MS, DEFAULT_PREFIX } from "./limiter/defaults";
import { createNetworkBlocks, type NetworkBlocks } from "./rules/network-blocks";
import { readNetworkBlocks } from "./store/plans";
import { type ScriptClient, withinDeadline } from "./store/script-runner";
import type { ClockSource } from "./store/store-clock";

export interface NetworkBlocksOptions {
  /** The limiter's prefix (the blocks live in `<prefix>:blocks`). @default "edge-limiter" */
  prefix?: string;
  /** Longest a copy is used before it is refreshed (off the request path), in ms. @default 1000 */
  refreshMs?: number;
  /** How long a load may take; past it the copy blocks nothing until the next. @default 500 */
  timeoutMs?: number;
  /** The limiter's `clock` ("caller" for a store without TIME in scripts). @default "redis" */
  clock?: ClockSource;
}

/**
 * @example
 * ```ts
 * const store = createStoreClient({ url, token });
 * app.use("/api/*", rateLimit({ rules, store, networkBlocks: networkBlocksFrom(store) }));
 * ```
 */
export function networkBlocksFrom(
  store: ScriptClient,
  options: NetworkBlocksOptions = {},
): NetworkBlocks {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const timeoutMs = options.timeoutMs ?? DEFAULT_LIMITER_TIMEOUT_MS;
  return createNetworkBlocks({
    load: () =>
      withinDeadline(store, timeoutMs, (client) =>
        // The store's clock state is the store client's, not the deadline's wrapper's.
        readNetworkBlocks(client, prefix, { clockOf: store, clock: options.clock }),
      ),
    refreshMs: options.refreshMs ?? 1_000,
  });
}
