/**
 * `limiter.peek`: what a request would get now, counting nothing (docs/check-api.md
 * `/check/peek`). A policy with `overrides` is peeked at the key's own limit, or answered as
 * blocked, as the decision script would (plan-changes.ts planOf); then the log is read
 * (store/peek-reset.ts). The logs only: the O(1) algorithms' state is a counter or a time,
 * readable only by re-running their arithmetic, and an approximate answer is worse than none for
 * an admin tool, so they are answered as not peeked.
 */
import { boundedKey } from "../bounded-key";
import { type Algorithm, isLogAlgorithm } from "../store/algorithm";
import { peekQuota, type QuotaClient } from "../store/peek-reset";
import type { LimiterContext } from "./context";
import { planOf } from "./plan-changes";
import { resolvePolicies } from "./resolved-policy";
import type { Decision, LimitRequest } from "./types";

/**
 * A peek: the decision a request would get now (`source` "redis", or "block" for a blocked
 * key, with `blocked: true`), or why it could not be peeked.
 */
export type Peek =
  | ({ peeked: true; blocked?: true } & Decision)
  | { peeked: false; policy: string; algorithm: Algorithm; detail: string };

export async function peekRequest(ctx: LimiterContext, given: LimitRequest): Promise<Peek> {
  // As the limiter counts it (a key spelling a digest is digested: bounded-key.ts), checked as
  // `limit` checks it (PolicyBoundsError).
  const request = { ...given, key: await boundedKey(given?.key) };
  const [policy] = resolvePolicies("peek", [request], ctx.defaultFailMode);
  if (!policy) throw new TypeError("peek: no policy");
  const { algorithm, name, windowMs, cost } = policy;
  if (!isLogAlgorithm(algorithm)) {
    return {
      peeked: false,
      policy: name,
      algorithm,
      detail: `peek supports the sliding log only (sliding-log); this check uses "${algorithm}"`,
    };
  }
  // A policy with overrides: the key's own limit, or its block (docs/plans.md).
  const plan = policy.overrides ? await planOf(ctx, { policy: name, key: request.key }) : undefined;
  const limit = plan?.limit ?? policy.limit;
  const common = { limit, policy: name, windowMs, algorithm };
  if (plan?.blockedUntil !== undefined) {
    const until = plan.blockedUntil;
    return {
      peeked: true,
      allowed: false,
      remaining: 0,
      reset: until,
      resetAfterMs: until === 0 ? 0 : Math.max(0, until - plan.now),
      retryAfterMs: 0,
      source: "block",
      blocked: true,
      ...common,
    };
  }
  if (cost > limit) {
    // An override below the cost: never admitted, nothing to read.
    return {
      peeked: true,
      allowed: false,
      remaining: 0,
      reset: ctx.now() + windowMs,
      resetAfterMs: windowMs,
      retryAfterMs: windowMs,
      source: "redis",
      ...common,
    };
  }
  const store = ctx.store as Partial<QuotaClient>;
  if (typeof store.evalshaRo !== "function" || typeof store.evalRo !== "function") {
    throw new TypeError("peek: the store client has no evalshaRo/evalRo (createStoreClient's has)");
  }
  const quota = await peekQuota(store as QuotaClient, {
    prefix: ctx.prefix,
    policy: name,
    key: policy.clientKey,
    limit,
    windowMs,
    cost,
    ...(ctx.clock.source === "caller" ? { now: ctx.now() } : {}),
  });
  return {
    peeked: true,
    allowed: quota.allowed,
    remaining: quota.remaining,
    reset: quota.reset,
    resetAfterMs: Math.max(0, quota.reset - quota.now),
    retryAfterMs: quota.retryAfterMs,
    source: "redis",
    ...common,
  };
}
