/**
 * An isolate's copy of the network blocks (rules/network-blocks.ts) loaded from a store
 * (store/plans.ts): what the worker builds per isolate, and what an app hands the middleware.
 */
import { DEFAULT_LIMITER_TIMEOUT_MS, DEFAULT_PREFIX } from "./limiter/defaults";
import {
  type BlocksRefreshFailed,
  createNetworkBlocks,
  type NetworkBlocks,
} from "./rules/network-blocks";
import { readNetworkBlocks } from "./store/plans";
import { type ScriptClient, withinDeadline } from "./store/script-runner";
import type { ClockSource } from "./store/store-clock";

export interface NetworkBlocksOptions {
  /** The limiter's prefix (the blocks live in `<prefix>:blocks`). @default "edge-limiter" */
  prefix?: string;
  /**
   * The oldest copy a decision is made on, in ms: a request that finds the copy older waits for
   * a refresh (busy isolates refresh a little earlier, off the request path). @default 1000
   */
  refreshMs?: number;
  /**
   * How long a load may take (and so a request's wait for one); past it the old copy decides (a
   * first load: nothing is blocked) until the next attempt, refreshMs later. @default 500
   */
  timeoutMs?: number;
  /** The limiter's `clock` ("caller" for a store without TIME in scripts). @default "redis" */
  clock?: ClockSource;
  /** A refresh failed (the old copy decides meanwhile). @default a JSON line on console.warn */
  onRefreshFailed?: (event: BlocksRefreshFailed) => void;
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
    onRefreshFailed:
      options.onRefreshFailed ?? ((event) => console.warn(JSON.stringify({ ...event, prefix }))),
  });
}
