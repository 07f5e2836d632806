/**
 * Every Decision the limiter returns is built here, one builder per source (store, cache,
 * fallback, fail-open, fail-closed), plus the MultiDecision around them.
 */

import { isConcurrency } from "../store/algorithm";
import type { EvaluateAnswer, PolicyAnswer } from "../store/evaluate";
import type { Exhaustion } from "./denial-cache";
import type { FallbackDecision } from "./fallback-limiter";
import type { Lease } from "./leases/lease";
import { legacySlotId } from "./member-id";
import type { CountedReceipt } from "./receipt-state";
import type { ResolvedPolicy } from "./resolved-policy";
import type { ConcurrencySlot, Decision, MultiDecision } from "./types";

/**
 * The one place a Decision is created, with its fields in one order: V8 then keeps one object
 * shape for all of them (spreading a partial object made the hot path measurably slower).
 */
function decision(
  policy: ResolvedPolicy,
  source: Decision["source"],
  outcome: Pick<Decision, "allowed" | "remaining" | "reset" | "resetAfterMs" | "retryAfterMs">,
  limit = policy.limit,
): Decision {
  return {
    allowed: outcome.allowed,
    limit,
    remaining: outcome.remaining,
    reset: outcome.reset,
    resetAfterMs: outcome.resetAfterMs,
    retryAfterMs: outcome.retryAfterMs,
    source,
    policy: policy.name,
    windowMs: policy.windowMs,
    algorithm: policy.algorithm,
  };
}

/** Denied from the denial cache, no round trip. */
export function fromCache(policy: ResolvedPolicy, entry: Exhaustion, at: number): Decision {
  const retryAfterMs = Math.max(1, (entry.retryAt ?? entry.until) - at);
  return decision(
    policy,
    "cache",
    {
      allowed: false,
      remaining: entry.remaining,
      reset: at + retryAfterMs,
      resetAfterMs: retryAfterMs,
      retryAfterMs,
    },
    entry.limit ?? policy.limit,
  );
}

/** A policy the cache did not deny, in a request it denied: not asked, nothing consumed. */
export function notAsked(policy: ResolvedPolicy, at: number): Decision {
  return decision(policy, "cache", {
    allowed: true,
    remaining: policy.limit,
    reset: at,
    resetAfterMs: 0,
    retryAfterMs: 0,
  });
}

/** What the store answered for this policy. */
function fromStore(policy: ResolvedPolicy, answer: PolicyAnswer): Decision {
  return decision(
    policy,
    "redis",
    {
      allowed: answer.allowed,
      remaining: Math.max(0, answer.remaining),
      reset: answer.reset,
      resetAfterMs: Math.max(0, answer.reset - answer.now),
      retryAfterMs: answer.retryAfterMs,
    },
    // A limit override's, when the store read one.
    answer.limit ?? policy.limit,
  );
}

/**
 * A request refused because one policy's client key is blocked (docs/plans.md): nothing counted.
 * `waitMs`: until the block ends, 0 when it has no end (then no Retry-After is announced).
 */
export function blockedRequest(
  policies: readonly ResolvedPolicy[],
  index: number,
  at: number,
  waitMs: number,
): MultiDecision {
  const blocked = policies[index] as ResolvedPolicy;
  const decisions = policies.map((policy, i) =>
    i === index
      ? decision(policy, "block", {
          allowed: false,
          remaining: 0,
          reset: at + waitMs,
          resetAfterMs: waitMs,
          retryAfterMs: waitMs,
        })
      : notAsked(policy, at),
  );
  const block: NonNullable<MultiDecision["blocked"]> = {
    policy: blocked.name,
    key: blocked.clientKey,
  };
  if (waitMs > 0) block.until = at + waitMs;
  return { allowed: false, decisions, deniedBy: blocked.name, replayed: false, blocked: block };
}

/**
 * Paid from a lease this isolate holds (isolate-lease-book.ts), no round trip. `remaining` is what the
 * store last reported plus what is left in this isolate's leases of the key (an estimate: other
 * isolates spend too); `reset` is the grant's, aged on the isolate clock.
 */
export function fromLease(
  policy: ResolvedPolicy,
  lease: Lease,
  remaining: number,
  at: number,
): Decision {
  const resetAfterMs = Math.max(0, lease.reset - lease.storeNow - (at - lease.sentAt));
  return decision(policy, "lease", {
    allowed: true,
    remaining: Math.min(policy.limit, Math.max(0, remaining)),
    // On the isolate clock: a lease taken from a region knows its reset only relatively.
    reset: at + resetAfterMs,
    resetAfterMs,
    retryAfterMs: 0,
  });
}

/**
 * Paid from a regional lease (docs/regions.md), one near round trip. `remaining` is an estimate:
 * home's last report plus the units live in the region's leases of the key.
 */
export function fromRegion(
  policy: ResolvedPolicy,
  remaining: number,
  resetAfterMs: number,
  at: number,
): Decision {
  return decision(policy, "region", {
    allowed: true,
    remaining: Math.min(policy.limit, Math.max(0, remaining)),
    reset: at + resetAfterMs,
    resetAfterMs,
    retryAfterMs: 0,
  });
}

/** Denied in the region: a denial home decided, held there until the time home named. */
export function regionDenied(policy: ResolvedPolicy, retryAfterMs: number, at: number): Decision {
  const wait = Math.max(1, retryAfterMs);
  return decision(policy, "region", {
    allowed: false,
    remaining: 0,
    reset: at + wait,
    resetAfterMs: wait,
    retryAfterMs: wait,
  });
}

/** The store did not answer and this policy fails closed: retry when the breaker may probe. */
export function failClosed(policy: ResolvedPolicy, at: number, retryAfterMs: number): Decision {
  return decision(policy, "fail-closed", {
    allowed: false,
    remaining: 0,
    reset: at + retryAfterMs,
    resetAfterMs: retryAfterMs,
    retryAfterMs,
  });
}

/** The local fallback limiter decided while the store did not answer. */
export function fallbackDecision(
  policy: ResolvedPolicy,
  local: FallbackDecision,
  at: number,
): Decision {
  return decision(policy, "fallback", {
    allowed: local.allowed,
    remaining: local.remaining,
    reset: at + local.resetAfterMs,
    resetAfterMs: local.resetAfterMs,
    retryAfterMs: local.retryAfterMs,
  });
}

/** Admitted without the store and without a fallback; `consumed` when the request was admitted. */
export function failOpen(policy: ResolvedPolicy, at: number, consumed: boolean): Decision {
  const { limit, windowMs } = policy;
  return decision(policy, "fail-open", {
    allowed: true,
    remaining: consumed ? Math.max(0, limit - policy.cost) : limit,
    reset: at + windowMs,
    resetAfterMs: windowMs,
    retryAfterMs: 0,
  });
}

/** A denied request: named by the denying policy with the longest wait. */
export function denied(decisions: Decision[]): MultiDecision {
  let binding: Decision | undefined;
  for (const decision of decisions) {
    if (!decision.allowed && (!binding || decision.retryAfterMs > binding.retryAfterMs)) {
      binding = decision;
    }
  }
  return {
    allowed: false,
    decisions,
    ...(binding ? { deniedBy: binding.policy } : {}),
    replayed: false,
  };
}

/**
 * A request id's retry with other parameters than its record's (EvaluateAnswer.conflict): not
 * decided, nothing counted. Every policy reports the refusal with no wait (time does not help).
 */
export function conflicted(
  policies: readonly ResolvedPolicy[],
  conflict: NonNullable<EvaluateAnswer["conflict"]>,
  at: number,
): MultiDecision {
  const decisions = policies.map((policy) =>
    decision(policy, "redis", {
      allowed: false,
      remaining: 0,
      reset: at,
      resetAfterMs: 0,
      retryAfterMs: 0,
    }),
  );
  const { index, field, recorded, asked } = conflict;
  const policy = policies[index]?.name ?? policies[0]?.name ?? "";
  return {
    allowed: false,
    decisions,
    replayed: false,
    conflict: { policy, field, recorded, asked },
  };
}

/**
 * The request as the store decided it: one decision per policy, the denying policy's name, and,
 * when the store admitted and counted it now, the receipt a refund takes.
 */
export function fromEvaluation(
  policies: readonly ResolvedPolicy[],
  answer: EvaluateAnswer,
  memberId: string,
  requestId: string | undefined,
): MultiDecision {
  const decisions = policies.map((policy, i) =>
    fromStore(policy, answer.policies[i] as PolicyAnswer),
  );
  const deniedBy = answer.deniedBy === undefined ? undefined : policies[answer.deniedBy]?.name;
  // Optional fields assigned, not spread from `cond ? {…} : {}` (an empty object each, on every
  // decision the store answers).
  const decided: MultiDecision = { allowed: answer.allowed, decisions, replayed: answer.replayed };
  if (deniedBy !== undefined) decided.deniedBy = deniedBy;
  // A replay's slot is the original's: the id its record kept (a record from before records
  // kept one: the request id's, as slots were named then).
  if (answer.allowed) {
    const slotId = !answer.replayed
      ? memberId
      : answer.member || (requestId !== undefined ? legacySlotId(requestId) : memberId);
    addSlots(decided, policies, answer.now, slotId);
  }
  if (answer.allowed && !answer.replayed) {
    const receipt: CountedReceipt = {
      memberId,
      policies: policies.map((policy) => policy.name),
      costs: policies.map((policy) => policy.cost),
      resolved: policies,
      at: answer.now,
    };
    if (requestId !== undefined) receipt.requestId = requestId;
    if (answer.offsets) receipt.offsets = answer.offsets;
    decided.receipt = receipt;
  }
  return decided;
}

/**
 * The slots an admitted request took in its concurrency policies (the member id is the slot's
 * id; `now` is the store's when it took them, a replay's the original's), on the decisions and
 * on the whole. Only calls with a concurrency policy pay for the scan's allocation.
 */
function addSlots(
  decided: MultiDecision,
  policies: readonly ResolvedPolicy[],
  now: number,
  memberId: string,
): void {
  let slots: ConcurrencySlot[] | undefined;
  for (let i = 0; i < policies.length; i++) {
    const policy = policies[i] as ResolvedPolicy;
    if (!isConcurrency(policy.algorithm)) continue;
    const slot: ConcurrencySlot = {
      policy: policy.name,
      key: policy.clientKey,
      slot: memberId,
      expires: now + policy.windowMs,
    };
    (decided.decisions[i] as Decision).slot = slot;
    if (slots) slots.push(slot);
    else slots = [slot];
  }
  if (slots) decided.slots = slots;
}
