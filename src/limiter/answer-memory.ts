/**
 * What the limiter learns from a store answer and forgets on a reset: the denial cache's claims,
 * the fallback's starting point, remembered key blocks and leases of the key.
 */
import { boundedKey } from "../bounded-key";
import { DEFAULT_ALGORITHM, isConcurrency } from "../store/algorithm";
import type { EvaluateAnswer, PolicyAnswer } from "../store/evaluate";
import { storageKey } from "../store/keys";
import { capacityFreed, type LimiterContext } from "./context";
import { rememberAnswer } from "./denial-cache";
import { type KeyBlocks, OVERRIDE_CLAIM_MAX_MS } from "./key-blocks";
import type { createLimiterLeases } from "./leases/isolate-leases";
import { denialCacheKey, type ResolvedPolicy } from "./resolved-policy";
import type { LimitRequest } from "./types";

/**
 * What an answer proves about later requests of its keys: the denial cache's claims, and what
 * the fallback starts from if the store stops answering (the report binds until everything
 * counted by the time it arrived has left the window).
 */
export function rememberAnswers(
  ctx: LimiterContext,
  policies: readonly ResolvedPolicy[],
  answer: EvaluateAnswer,
  sentAt: number,
  receivedAt: number,
) {
  const { cache, fallback } = ctx;
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as ResolvedPolicy;
    const policyAnswer = answer.policies[i] as PolicyAnswer;
    // In-flight counts change whenever a holder releases, which no clock predicts: a
    // concurrency answer proves nothing for later, so neither the cache nor the fallback keeps it.
    if (isConcurrency(policy.algorithm)) continue;
    if (cache) {
      // A limit that may change at run time: claims short enough for the change to apply.
      const maxClaimMs = policy.overrides ? OVERRIDE_CLAIM_MAX_MS : Number.POSITIVE_INFINITY;
      rememberAnswer(
        cache,
        policy.cacheKey,
        policy.cost,
        policyAnswer,
        sentAt,
        receivedAt,
        maxClaimMs,
      );
    }
    fallback?.note(
      policy.cacheKey,
      Math.max(0, policyAnswer.remaining),
      policy.windowMs,
      receivedAt,
    );
  }
}

/** After a reset of this key elsewhere (the admin route). */
function forgetKey(ctx: LimiterContext, key: string) {
  capacityFreed(ctx, [key]);
  // Nor may the fallback start from a report of the log before the reset.
  ctx.fallback?.unnote(key);
}

/**
 * After a reset of this key elsewhere (the admin route): this isolate's leases of it, its cached
 * denial and block, and the fallback's report go.
 */
export function forgetRequest(
  ctx: LimiterContext,
  request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs" | "algorithm">,
  books: readonly (ReturnType<typeof createLimiterLeases> | undefined)[],
  keyBlocks: KeyBlocks,
): void {
  // The reset deleted what this isolate's leases of the key had recorded: nothing more is
  // spent from them, nor given back into the log the reset started.
  const redisKey = storageKey(
    ctx.prefix,
    request.policy,
    request.key,
    request.algorithm ?? DEFAULT_ALGORITHM,
  );
  for (const book of books) book?.book.drop(redisKey);
  const key = boundedKey(request.key);
  if (typeof key === "string") {
    keyBlocks.forget(denialCacheKey(request));
    forgetKey(ctx, denialCacheKey(request));
    return;
  }
  // A digested key: answers in flight are not remembered from now (the epoch), and its
  // entries go once the digest is known (a decision in between may still deny from them, as
  // another isolate's cache does until its claim expires).
  ctx.capacityEpoch++;
  void key.then((digested) => {
    keyBlocks.forget(denialCacheKey({ ...request, key: digested }));
    forgetKey(ctx, denialCacheKey({ ...request, key: digested }));
  });
}
