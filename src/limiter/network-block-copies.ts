/**
 * `limiter.networkBlocks()`: this isolate's copy of the network blocks under the limiter's
 * prefix (net/network-blocks.ts matches a request against it), loaded from the limiter's store
 * on its clock. One copy per limiter and options, so every middleware and route of an isolate
 * shares its refreshes; the limiter's own network block changes invalidate them all.
 */
import {
  type BlocksRefreshFailed,
  createNetworkBlocks,
  type NetworkBlocks,
} from "../net/network-blocks";
import { readNetworkBlocks } from "../store/plan-reads";
import { withinDeadline } from "../store/script-runner";
import { StoreTimeoutError } from "../store/with-deadline";
import type { LimiterContext } from "./context";

export interface NetworkBlocksOptions {
  /**
   * The oldest copy a decision is made on, in ms: a request that finds the copy older waits for
   * a refresh (busy isolates refresh a little earlier, off the request path). @default 1000
   */
  refreshMs?: number;
  /**
   * How long a load may take (and so a request's wait for one); past it the old copy decides (a
   * first load: nothing is blocked) until the next attempt, refreshMs later.
   * @default the limiter's timeoutMs
   */
  timeoutMs?: number;
  /** A refresh failed (the old copy decides meanwhile). @default a JSON line on console.warn */
  onRefreshFailed?: ((event: BlocksRefreshFailed) => void) | undefined;
}

const DEFAULT_BLOCKS_REFRESH_MS = 1_000;

export interface NetworkBlockCopies {
  /** The copy for these options: the same object for the same options. */
  of(options?: NetworkBlocksOptions): NetworkBlocks;
  /** Every copy reloads on its next request (a change made through this limiter). */
  invalidate(): void;
}

export function createNetworkBlockCopies(ctx: LimiterContext): NetworkBlockCopies {
  // A few at most (one per distinct options): a list, compared field by field.
  const copies: { options: NetworkBlocksOptions; blocks: NetworkBlocks }[] = [];
  return {
    of(given = {}) {
      const options: NetworkBlocksOptions & { refreshMs: number; timeoutMs: number } = {
        refreshMs: given.refreshMs ?? DEFAULT_BLOCKS_REFRESH_MS,
        timeoutMs: given.timeoutMs ?? ctx.timeoutMs,
        onRefreshFailed: given.onRefreshFailed,
      };
      const known = copies.find(
        (copy) =>
          copy.options.refreshMs === options.refreshMs &&
          copy.options.timeoutMs === options.timeoutMs &&
          copy.options.onRefreshFailed === options.onRefreshFailed,
      );
      if (known) return known.blocks;
      const { prefix, store, breaker } = ctx;
      const blocks = createNetworkBlocks({
        load: async () => {
          // A store whose breaker is not closed is known not to answer: the old copy decides
          // rather than every request (a healthy shard's keys too, when this is the first
          // shard) waiting a timeout for it. Only decisions probe it; loads resume once one
          // has found it answering.
          if (breaker.state !== "closed") {
            throw new Error(`the store's circuit breaker is ${breaker.state}`);
          }
          const permit = breaker.acquire();
          const sentAt = ctx.now();
          try {
            const read = await withinDeadline(store, options.timeoutMs, (client) =>
              // The store's clock state is the store client's, not the deadline's wrapper's.
              readNetworkBlocks(client, prefix, { clockOf: store, clock: ctx.clock.source }),
            );
            ctx.lastAnswerAt = Math.max(ctx.lastAnswerAt, ctx.now());
            breaker.success(permit);
            return read;
          } catch (error) {
            // As for a decision: slow while the store answered others is not dead.
            if (error instanceof StoreTimeoutError && ctx.lastAnswerAt >= sentAt) {
              breaker.release(permit);
            } else breaker.failure(permit, error);
            throw error;
          }
        },
        refreshMs: options.refreshMs,
        now: ctx.now,
        onRefreshFailed:
          options.onRefreshFailed ??
          ((event) => console.warn(JSON.stringify({ ...event, prefix }))),
      });
      copies.push({ options, blocks });
      return blocks;
    },
    invalidate() {
      for (const copy of copies) copy.blocks.invalidate();
    },
  };
}
