/**
 * The degraded path: what a decision is when the store did not answer (or was not asked: the
 * breaker is open, a single flight failed). Fail closed, the local fallback, or fail open; all
 * or nothing still.
 */
import type { CircuitBreaker } from "./circuit-breaker";
import { denied, failClosed, failOpen, fallbackDecision } from "./decisions";
import type { FallbackDecision, FallbackLimiter } from "./fallback-limiter";
import type { ResolvedPolicy } from "./resolved-policy";
import type { MultiDecision } from "./types";

/** Retry-After of a fail-closed denial when the breaker gives no better estimate. */
const FAIL_CLOSED_RETRY_MS = 1_000;

export interface DegradedOptions {
  now: () => number;
  /** The local limiter; undefined: fail open admits everything. */
  fallback: FallbackLimiter | undefined;
  /** Share of each limit the fallback admits in this isolate. */
  fallbackFraction: number;
  /** Its cool-down is a fail-closed denial's Retry-After. */
  breaker: Pick<CircuitBreaker, "retryAfterMs">;
}

/**
 * Any fail-closed policy denies the request; otherwise the fallback checks every policy before
 * it consumes in any; without a fallback, fail open. Policies a denied request did not consume
 * in say so. Built once per limiter.
 */
export function createDegradedPath(
  options: DegradedOptions,
): (policies: readonly ResolvedPolicy[]) => MultiDecision {
  const { now, fallback, fallbackFraction, breaker } = options;
  // The isolate's share of the limit; never below the request's own cost, or a request costing
  // more than the share would be denied for the whole outage: it is admitted when nothing
  // else is in the isolate's window (docs/failure-modes.md).
  const localLimit = (policy: ResolvedPolicy) =>
    Math.max(policy.cost, Math.floor(policy.limit * fallbackFraction));
  const peek = (policy: ResolvedPolicy, at: number) =>
    fallback?.peek(policy.cacheKey, localLimit(policy), policy.windowMs, policy.cost, at);

  return (policies) => {
    const at = now();
    if (policies.some((policy) => policy.failMode === "closed")) {
      const retryAfterMs = breaker.retryAfterMs || FAIL_CLOSED_RETRY_MS;
      return denied(
        policies.map((policy) => {
          if (policy.failMode === "closed") return failClosed(policy, at, retryAfterMs);
          const local = peek(policy, at);
          return local ? fallbackDecision(policy, local, at) : failOpen(policy, at, false);
        }),
      );
    }
    if (!fallback) {
      return {
        allowed: true,
        decisions: policies.map((policy) => failOpen(policy, at, true)),
        replayed: false,
      };
    }
    const peeked = policies.map((policy) => peek(policy, at) as FallbackDecision);
    if (!peeked.every((local) => local.allowed)) {
      return denied(
        policies.map((policy, i) => fallbackDecision(policy, peeked[i] as FallbackDecision, at)),
      );
    }
    const decisions = policies.map((policy) =>
      fallbackDecision(
        policy,
        fallback.limit(policy.cacheKey, localLimit(policy), policy.windowMs, policy.cost, at),
        at,
      ),
    );
    // Only the fallback's memory cap can refuse after a successful peek (then the policies
    // committed before it keep their admission: the cap is a last resort against floods).
    return decisions.every((d) => d.allowed)
      ? { allowed: true, decisions, replayed: false }
      : denied(decisions);
  };
}
