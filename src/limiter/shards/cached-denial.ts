/**
 * The denial cache for a request whose parts live on several shards (docs/shards.md). One
 * store's limiter asks the cache for every policy before its store call, and one policy known to
 * deny denies the whole. Its parts decided apart would each ask only for their own: a part on
 * another shard would still take its units (or a concurrency slot, which other holders are then
 * refused for) until the denial's refund. So the whole request asks first, once, for every part.
 */
import { denied, fromCache, notAsked } from "../decisions";
import type { DenialCache } from "../denial-cache";
import type { ResolvedPolicy } from "../resolved-policy";
import type { MultiDecision } from "../types";

/**
 * The whole request denied from the cache, or undefined when no policy is known to deny. Not
 * for a request id (only the store holds the original answer), nor for a request whose every
 * policy may be paid from a lease: one store's limiter tries its leases before its cache, and
 * a lease's units were counted when it was taken.
 */
export function cachedDenial(
  cache: DenialCache | false,
  policies: readonly ResolvedPolicy[],
  requestId: string | undefined,
  at: number,
): MultiDecision | undefined {
  if (!cache || requestId !== undefined || policies.every((policy) => policy.lease)) {
    return undefined;
  }
  const lookups = policies.map((policy) => cache.lookup(policy.cacheKey, policy.cost, at));
  if (!lookups.some((lookup) => lookup.hit)) return undefined;
  return denied(
    policies.map((policy, i) => {
      const lookup = lookups[i];
      return lookup?.hit ? fromCache(policy, lookup.entry, at) : notAsked(policy, at);
    }),
  );
}
