/**
 * The degraded path: what a decision is when the store did not answer (or was not asked: the
 * breaker is open, a single flight failed). Fail closed, the local fallback, or fail open; all
 * or nothing still.
 */
import { isConcurrency } from "../store/algorithm";
import type { CircuitBreaker } from "./circuit-breaker";
import { denied, failClosed, failOpen, fallbackDecision } from "./decisions";
import type { FallbackDecision, FallbackLimiter } from "./fallback-limiter";
import { LOCAL_SLOT_PREFIX, type LocalSlots, localSlotKey } from "./local-slots";
import { newSlotId } from "./member-id";
import type { ResolvedPolicy } from "./resolved-policy";
import type { ConcurrencySlot, Decision, MultiDecision } from "./types";

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
  /** Concurrency policies' slots in this isolate, with the fallback on. */
  localSlots: LocalSlots;
}

/**
 * Any fail-closed policy denies the request; otherwise the fallback checks every policy before
 * it consumes in any; without a fallback, fail open. Policies a denied request did not consume
 * in say so. Built once per limiter.
 */
export function createDegradedPath(
  options: DegradedOptions,
): (policies: readonly ResolvedPolicy[]) => MultiDecision {
  const { now, fallback, fallbackFraction, breaker, localSlots } = options;
  // The isolate's share of the limit; never below the request's own cost, or a request costing
  // more than the share would be denied for the whole outage: it is admitted when nothing
  // else is in the isolate's window (docs/failure-modes.md).
  const localLimit = (policy: ResolvedPolicy) =>
    Math.max(policy.cost, Math.floor(policy.limit * fallbackFraction));
  // A concurrency policy counts in flight here instead (local-slots.ts): a rate of it would
  // bound nothing that matters while requests are slow.
  const peek = (policy: ResolvedPolicy, at: number) => {
    if (!fallback) return undefined;
    return isConcurrency(policy.algorithm)
      ? localSlots.peek(localSlotKey(policy.name, policy.clientKey), localLimit(policy), at)
      : fallback.peek(policy.cacheKey, localLimit(policy), policy.windowMs, policy.cost, at);
  };

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
    let slots: ConcurrencySlot[] | undefined;
    const decisions = policies.map((policy) => {
      if (!isConcurrency(policy.algorithm)) {
        return fallbackDecision(
          policy,
          fallback.limit(policy.cacheKey, localLimit(policy), policy.windowMs, policy.cost, at),
          at,
        );
      }
      const slot: ConcurrencySlot = {
        policy: policy.name,
        key: policy.clientKey,
        slot: `${LOCAL_SLOT_PREFIX}${newSlotId()}`,
        expires: at + policy.windowMs,
      };
      const local = localSlots.take(
        localSlotKey(policy.name, policy.clientKey),
        localLimit(policy),
        slot.slot,
        slot.expires,
        at,
      );
      const decided: Decision = fallbackDecision(policy, local, at);
      if (local.allowed) {
        decided.slot = slot;
        if (slots) slots.push(slot);
        else slots = [slot];
      }
      return decided;
    });
    // Only the fallback's memory cap can refuse after a successful peek (then the policies
    // committed before it keep their admission: the cap is a last resort against floods).
    if (!decisions.every((d) => d.allowed)) {
      // A refused request holds nothing: the local slots it took go back.
      for (const slot of slots ?? []) {
        localSlots.release(localSlotKey(slot.policy, slot.key), slot.slot, at);
      }
      return denied(decisions);
    }
    const admitted: MultiDecision = { allowed: true, decisions, replayed: false };
    if (slots) admitted.slots = slots;
    return admitted;
  };
}
