/**
 * Key blocks and limit overrides as this isolate sees them between store calls (docs/plans.md).
 * The store reads both inside the decision script; what an isolate answers without asking it
 * (a cached denial, a cached block) holds at most OVERRIDE_CLAIM_MAX_MS, so a change made
 * through any isolate applies everywhere within that.
 */
import type { KeyBlock } from "../store/evaluate";
import { blockedRequest } from "./decisions";
import { createDenialCache } from "./denial-cache";
import type { ResolvedPolicy } from "./resolved-policy";
import type { MultiDecision } from "./types";

/** Longest an isolate answers a policy with `overrides` from memory (a denial or a block). */
export const OVERRIDE_CLAIM_MAX_MS = 1_000;

/** Most blocked keys an isolate remembers, and their bytes (the keys at 2 bytes a character). */
const MAX_BLOCKED_KEYS = 10_000;
const MAX_BLOCKED_BYTES = 1024 * 1024;

export interface KeyBlocks {
  /** The request denied from a block this isolate saw, or undefined. */
  lookup(policies: readonly ResolvedPolicy[], at: number): MultiDecision | undefined;
  /** A block the store answered: remembered, and the request it refused. */
  remember(
    policies: readonly ResolvedPolicy[],
    block: KeyBlock,
    storeNow: number,
    receivedAt: number,
  ): MultiDecision;
  forget(cacheKey: string): void;
  readonly size: number;
}

export function createKeyBlocks(): KeyBlocks {
  // A block denies every cost: one bounded LRU of the denial cache's kind, minCost 1.
  const cache = createDenialCache({ maxEntries: MAX_BLOCKED_KEYS, maxBytes: MAX_BLOCKED_BYTES });
  return {
    lookup(policies, at) {
      for (let i = 0; i < policies.length; i++) {
        const policy = policies[i] as ResolvedPolicy;
        if (!policy.overrides) continue;
        const found = cache.lookup(policy.cacheKey, 1, at);
        if (!found.hit) continue;
        const retryAt = found.entry.retryAt ?? found.entry.until;
        return blockedRequest(policies, i, at, Number.isFinite(retryAt) ? retryAt - at : 0);
      }
      return undefined;
    },
    remember(policies, block, storeNow, receivedAt) {
      const policy = policies[block.index] as ResolvedPolicy;
      const waitMs = block.until === 0 ? 0 : Math.max(1, block.until - storeNow);
      cache.remember(
        policy.cacheKey,
        {
          minCost: 1,
          remaining: 0,
          until:
            receivedAt +
            (waitMs === 0 ? OVERRIDE_CLAIM_MAX_MS : Math.min(waitMs, OVERRIDE_CLAIM_MAX_MS)),
          retryAt: waitMs === 0 ? Number.POSITIVE_INFINITY : receivedAt + waitMs,
        },
        receivedAt,
      );
      return blockedRequest(policies, block.index, receivedAt, waitMs);
    },
    forget(cacheKey) {
      cache.forget(cacheKey);
    },
    get size() {
      return cache.size;
    },
  };
}
