/**
 * LimitRequest → ResolvedPolicy: each policy of a decision resolved once (defaults applied, its
 * cache key built) into the one object the whole decision uses, the store call included.
 */
import { DEFAULT_ALGORITHM } from "../store/algorithm";
import { storageKey } from "../store/keys";
import type { StorePolicy } from "../store/script-inputs";
import { LEASABLE } from "./lease";
import type { FailMode, LimitRequest } from "./types";

/**
 * One policy of one decision: what the store runs (StorePolicy: key, algorithm, limit, window,
 * cost; the store reads only those) plus what the limiter needs around the call. One object per
 * policy per decision, passed to the store as it is and kept in the refund receipt.
 */
export interface ResolvedPolicy extends StorePolicy {
  /** The policy (rule) name: decisions, deniedBy, refunds by name. */
  readonly policy: string;
  /** The client key as the caller gave it (the storage key encodes it). */
  readonly clientKey: string;
  readonly failMode: FailMode;
  /** Its key in the denial cache and the fallback limiter (denialCacheKey). */
  readonly cacheKey: string;
  /** The request asked for leases and its algorithm can be leased exactly (lease.ts). */
  readonly lease: boolean;
  /**
   * Its Redis key: "" until the store is to be asked (withStorageKeys), so a denial from the
   * cache never builds it.
   */
  key: string;
}

/**
 * The key a request has in the denial cache and the fallback limiter (for `forget` after a reset).
 * The limit, window and algorithm are part of it: ad-hoc checks of one policy may differ in them,
 * and each algorithm counts in its own Redis key.
 */
export function denialCacheKey(
  request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs" | "algorithm">,
): string {
  const algorithm = request.algorithm ?? DEFAULT_ALGORITHM;
  return `${request.policy}\n${algorithm}\n${request.limit}\n${request.windowMs}\n${request.key}`;
}

export function resolvePolicy(request: LimitRequest, defaultFailMode: FailMode): ResolvedPolicy {
  const algorithm = request.algorithm ?? DEFAULT_ALGORITHM;
  return {
    policy: request.policy,
    clientKey: request.key,
    algorithm,
    limit: request.limit,
    windowMs: request.windowMs,
    cost: request.cost ?? 1,
    failMode: request.failMode ?? defaultFailMode,
    cacheKey: denialCacheKey(request),
    lease: request.lease === true && LEASABLE.has(algorithm),
    key: "",
  };
}

/**
 * Builds the Redis keys of a decision about to ask the store. Total (keys.ts encodes any
 * string), and called before the breaker hands out a permit: nothing a client sent can fail
 * between the permit and the store call.
 */
export function withStorageKeys(policies: readonly ResolvedPolicy[], prefix: string): void {
  for (const policy of policies) {
    policy.key = storageKey(prefix, policy.policy, policy.clientKey, policy.algorithm);
  }
}
