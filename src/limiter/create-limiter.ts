import { boundsIssue } from "../config/limits";
import { type Algorithm, DEFAULT_ALGORITHM } from "../store/algorithm";
import { type EvaluateAnswer, evaluate, type PolicyAnswer } from "../store/evaluate";
import { storageKey } from "../store/keys";
import { refund as storeRefund } from "../store/refund";
import { PolicyBoundsError, type StorePolicy } from "../store/script-inputs";
import { type ScriptClient, withinDeadline } from "../store/script-runner";
import { StoreTimeoutError } from "../store/with-deadline";
import { createCircuitBreaker, type Permit } from "./circuit-breaker";
import { createDenialCache, type Exhaustion } from "./denial-cache";
import { createFallbackLimiter, type FallbackDecision } from "./fallback-limiter";
import { nextMemberId } from "./member-id";
import { createSingleFlight } from "./single-flight";
import { refusesStoreClock } from "./store-clock";
import type {
  ClockChangeEvent,
  ClockSource,
  Decision,
  Limiter,
  LimiterOptions,
  LimitRequest,
  MultiDecision,
  RefundOutcome,
  RefundReceipt,
} from "./types";
import { DEFAULT_LIMITER_TIMEOUT_MS } from "./types";

/** Retry-After of a fail-closed denial when the breaker gives no better estimate. */
const FAIL_CLOSED_RETRY_MS = 1_000;

/**
 * The key a request has in the denial cache and the fallback limiter (for `forget` after a reset).
 * The limit, window and algorithm are part of it: ad-hoc checks of one policy may differ in them,
 * and each algorithm counts in its own Redis key.
 */
export function denialCacheKey(
  request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs" | "algorithm">,
) {
  const algorithm = request.algorithm ?? DEFAULT_ALGORITHM;
  return `${request.policy}\n${algorithm}\n${request.limit}\n${request.windowMs}\n${request.key}`;
}

/** One policy of a decision, resolved once. */
interface Item {
  request: LimitRequest;
  cost: number;
  algorithm: Algorithm;
  cacheKey: string;
}

export function createLimiter(options: LimiterOptions): Limiter {
  const prefix = options.prefix ?? "edge-limiter";
  // Mutable: a store that refuses TIME in scripts switches it to "caller" (see evaluateOn).
  let clock: ClockSource = options.clock ?? "redis";
  const defaultFailMode = options.failMode ?? "open";
  const timeoutMs = options.timeoutMs ?? DEFAULT_LIMITER_TIMEOUT_MS;
  const now = options.now ?? Date.now;
  const singleFlight = options.singleFlight ?? true;
  const cacheOption = options.denialCache ?? {};
  const cache =
    cacheOption === false
      ? undefined
      : "lookup" in cacheOption
        ? cacheOption
        : createDenialCache(cacheOption);
  const fallbackOption = options.fallback ?? {};
  const fallbackFraction = fallbackOption === false ? 0 : (fallbackOption.fraction ?? 1);
  const fallback =
    fallbackOption === false
      ? undefined
      : (fallbackOption.limiter ?? createFallbackLimiter(fallbackOption));
  const breaker = createCircuitBreaker({
    // A probe is lost if it has not reported within twice the decision's own deadline.
    probeTimeoutMs: 2 * timeoutMs,
    ...options.breaker,
    now,
    ...(options.onBreakerChange ? { onStateChange: options.onBreakerChange } : {}),
  });
  // One store call in flight per cache key; a flight is trusted to settle only until the
  // decision's deadline (see single-flight.ts).
  const flights = createSingleFlight({ timeoutMs, now });
  // Bumped when a refund or a forget (an admin reset) starts and when a refund ends. Both free
  // capacity, which breaks the cache's premise (only time frees it): a store answer whose call
  // overlapped one may describe the log before it, so it is not remembered (they are rare).
  let capacityEpoch = 0;
  // When (isolate clock) the store last answered a call: a timeout of a call sent before that is
  // a slow store, not a dead one (see decideAll).
  let lastAnswerAt = Number.NEGATIVE_INFINITY;

  function itemOf(request: LimitRequest): Item {
    const algorithm = request.algorithm ?? DEFAULT_ALGORITHM;
    return {
      request,
      cost: request.cost ?? 1,
      algorithm,
      cacheKey: denialCacheKey(request),
    };
  }

  function specOf(item: Item): StorePolicy {
    const { request } = item;
    return {
      key: storageKey(prefix, request.policy, request.key, item.algorithm),
      algorithm: item.algorithm,
      limit: request.limit,
      windowMs: request.windowMs,
      cost: item.cost,
    };
  }

  /**
   * Calls the store on the limiter's clock. If the store refuses the Redis clock (a script
   * calling TIME is rejected: a store that wants deterministic scripts), switch to the caller
   * clock for good, say so once, and decide again within the same deadline. Safe to retry: TIME
   * is the script's first command, so the refused call changed nothing.
   */
  async function onClock<T>(
    store: ScriptClient,
    call: (store: ScriptClient, at: number | undefined) => Promise<T>,
  ): Promise<T> {
    if (clock === "caller") return call(store, now());
    try {
      return await call(store, undefined);
    } catch (error) {
      if (!refusesStoreClock(error)) throw error;
      switchToCallerClock(error);
      return call(store, now());
    }
  }

  /** Once per limiter (concurrent calls may all see the refusal): switch, and say so once. */
  function switchToCallerClock(error: unknown) {
    if (clock === "caller") return;
    clock = "caller";
    const event: ClockChangeEvent = {
      event: "store-clock",
      from: "redis",
      to: "caller",
      error: String(error).split(", command was:")[0]?.slice(0, 300) ?? "",
    };
    if (options.onClockChange) options.onClockChange(event);
    else console.warn(JSON.stringify(event));
  }

  /** Remembers what the answer proves about later requests of this key (see denial-cache.ts). */
  function remember(
    cacheKey: string,
    cost: number,
    result: PolicyAnswer,
    sentAt: number,
    receivedAt: number,
  ) {
    if (!cache) return;
    // The store decided between sentAt and receivedAt (isolate clock). Converting with the
    // relative wait from sentAt is never late, so the cache never denies what the store admits;
    // from receivedAt it is never early, which is what Retry-After must be.
    const wait = result.allowed ? result.reset - result.now : result.retryAfterMs;
    const entry: Exhaustion = {
      // Denied: this cost and more, until capacity for it frees. Admitted with too little left
      // for another of this cost: every cost above what remains, until the next unit frees.
      // (In a request another policy denied, a policy that alone admitted reports its remaining
      // without this request's cost, so remaining ≥ cost: it is forgotten, never cached.)
      minCost: result.allowed ? result.remaining + 1 : cost,
      remaining: Math.max(0, result.remaining),
      until: sentAt + wait,
      retryAt: receivedAt + wait,
    };
    if (result.allowed && result.remaining >= cost) cache.forget(cacheKey);
    else if (wait > 0) cache.remember(cacheKey, entry, receivedAt);
  }

  /**
   * Every decision is built here, with its fields in one order: V8 then keeps one object shape
   * for all of them (spreading a partial object made the hot path measurably slower).
   */
  function decision(
    item: Item,
    source: Decision["source"],
    outcome: Pick<Decision, "allowed" | "remaining" | "reset" | "resetAfterMs" | "retryAfterMs">,
  ): Decision {
    const { request } = item;
    return {
      allowed: outcome.allowed,
      limit: request.limit,
      remaining: outcome.remaining,
      reset: outcome.reset,
      resetAfterMs: outcome.resetAfterMs,
      retryAfterMs: outcome.retryAfterMs,
      source,
      policy: request.policy,
      windowMs: request.windowMs,
      algorithm: item.algorithm,
    };
  }

  function fromCache(item: Item, entry: Exhaustion, at: number): Decision {
    const retryAfterMs = Math.max(1, (entry.retryAt ?? entry.until) - at);
    return decision(item, "cache", {
      allowed: false,
      remaining: entry.remaining,
      reset: at + retryAfterMs,
      resetAfterMs: retryAfterMs,
      retryAfterMs,
    });
  }

  /** A policy the cache did not deny, in a request it denied: not asked, nothing consumed. */
  function notAsked(item: Item, at: number): Decision {
    return decision(item, "cache", {
      allowed: true,
      remaining: item.request.limit,
      reset: at,
      resetAfterMs: 0,
      retryAfterMs: 0,
    });
  }

  function fromStore(item: Item, result: PolicyAnswer): Decision {
    return decision(item, "redis", {
      allowed: result.allowed,
      remaining: Math.max(0, result.remaining),
      reset: result.reset,
      resetAfterMs: Math.max(0, result.reset - result.now),
      retryAfterMs: result.retryAfterMs,
    });
  }

  function failClosed(item: Item, at: number): Decision {
    const retryAfterMs = breaker.retryAfterMs || FAIL_CLOSED_RETRY_MS;
    return decision(item, "fail-closed", {
      allowed: false,
      remaining: 0,
      reset: at + retryAfterMs,
      resetAfterMs: retryAfterMs,
      retryAfterMs,
    });
  }

  function fallbackDecision(item: Item, local: FallbackDecision, at: number): Decision {
    return decision(item, "fallback", {
      allowed: local.allowed,
      remaining: local.remaining,
      reset: at + local.resetAfterMs,
      resetAfterMs: local.resetAfterMs,
      retryAfterMs: local.retryAfterMs,
    });
  }

  function failOpen(item: Item, at: number, consumed: boolean): Decision {
    const { limit, windowMs } = item.request;
    return decision(item, "fail-open", {
      allowed: true,
      remaining: consumed ? Math.max(0, limit - item.cost) : limit,
      reset: at + windowMs,
      resetAfterMs: windowMs,
      retryAfterMs: 0,
    });
  }

  /**
   * The store did not answer (or was not asked): all or nothing still. Any fail-closed policy
   * denies the request; otherwise the fallback checks every policy before it consumes in any;
   * without a fallback, fail open. Policies a denied request did not consume in say so.
   */
  function degraded(items: readonly Item[]): MultiDecision {
    const at = now();
    const closed = items.map((item) => (item.request.failMode ?? defaultFailMode) === "closed");
    // The isolate's share of the limit; never below the request's own cost, or a request costing
    // more than the share would be denied for the whole outage: it is admitted when nothing
    // else is in the isolate's window (README "Failure modes").
    const localLimit = (item: Item) =>
      Math.max(item.cost, Math.floor(item.request.limit * fallbackFraction));
    const peek = (item: Item) =>
      fallback?.peek(item.cacheKey, localLimit(item), item.request.windowMs, item.cost, at);

    if (closed.some(Boolean)) {
      const decisions = items.map((item, i) => {
        if (closed[i]) return failClosed(item, at);
        const local = peek(item);
        return local ? fallbackDecision(item, local, at) : failOpen(item, at, false);
      });
      return denied(decisions);
    }
    if (!fallback) {
      return {
        allowed: true,
        decisions: items.map((item) => failOpen(item, at, true)),
        replayed: false,
      };
    }
    const peeked = items.map((item) => peek(item) as FallbackDecision);
    if (!peeked.every((local) => local.allowed)) {
      return denied(
        items.map((item, i) => fallbackDecision(item, peeked[i] as FallbackDecision, at)),
      );
    }
    const decisions = items.map((item) =>
      fallbackDecision(
        item,
        fallback.limit(item.cacheKey, localLimit(item), item.request.windowMs, item.cost, at),
        at,
      ),
    );
    // Only the fallback's memory cap can refuse after a successful peek (then the policies
    // committed before it keep their admission: the cap is a last resort against floods).
    return decisions.every((d) => d.allowed)
      ? { allowed: true, decisions, replayed: false }
      : denied(decisions);
  }

  async function decideAll(items: readonly Item[], requestId?: string): Promise<MultiDecision> {
    // The denial cache: one policy known to deny is enough to deny the whole request, and
    // only time frees capacity (other requests can only consume), so no round trip is needed.
    // Not for a request id: its retry must get the original answer, which only the store holds
    // (an admitted original followed by exhaustion would otherwise be denied from the cache).
    let at = now();
    const cached = items.map((item) =>
      requestId === undefined ? cache?.lookup(item.cacheKey, item.cost, at) : undefined,
    );
    if (cached.some((lookup) => lookup?.hit)) {
      return denied(
        items.map((item, i) => {
          const lookup = cached[i];
          return lookup?.hit ? fromCache(item, lookup.entry, at) : notAsked(item, at);
        }),
      );
    }
    // Single flight: one policy, no request id (a request id's retry is answered by the store).
    const only = items.length === 1 && requestId === undefined ? items[0] : undefined;
    const lookup = cached[0];
    if (only && singleFlight && lookup && !lookup.hit && lookup.exhausted) {
      const pending = flights.follow(only.cacheKey);
      if (pending) {
        // The flight failed (timeout, error) or was lost: the store is not answering now. Decide
        // as it did rather than wait a second timeout of our own.
        const flew = await pending;
        if (!flew) return degraded(items);
        at = now();
        const after = cache?.lookup(only.cacheKey, only.cost, at);
        if (after?.hit) return denied([fromCache(only, after.entry, at)]);
      }
    }

    // Everything built from what the client sent (keys, request id) is built before the
    // breaker hands out a permit: nothing a client sends can fail between the permit and the
    // store call, so a permit is always reported and a client's input never counts as a store
    // failure.
    const specs = items.map(specOf);
    const memberId = nextMemberId();

    const permit: Permit = breaker.acquire();
    if (permit === "skip") return degraded(items);

    const sentAt = now();
    const epochAtSend = capacityEpoch;
    const call = withinDeadline(options.store, timeoutMs, (store) =>
      onClock(store, (client, at) =>
        evaluate(client, {
          policies: specs,
          memberId,
          ...(at !== undefined ? { now: at } : {}),
          ...(requestId !== undefined ? { requestId } : {}),
        }),
      ),
    );
    if (only && singleFlight) {
      flights.lead(
        only.cacheKey,
        call.then(
          () => true,
          () => false,
        ),
      );
    }
    let result: EvaluateAnswer;
    try {
      result = await call;
    } catch (error) {
      // Slow is not dead: a call that timed out while the store answered another call sent no
      // earlier proves the store is up and busy. It degrades this decision but does not move
      // the breaker (opening it would send every request to the local fallback at once).
      if (error instanceof StoreTimeoutError && lastAnswerAt >= sentAt) breaker.release(permit);
      else breaker.failure(permit, error);
      options.onStoreError?.(error);
      return degraded(items);
    }
    const receivedAt = now();
    lastAnswerAt = Math.max(lastAnswerAt, receivedAt);
    breaker.success(permit);
    // A replayed answer is the original's, at the original's time: it proves nothing now.
    // Nor does one a refund or reset may have overtaken (see capacityEpoch).
    const provesNow = !result.replayed && capacityEpoch === epochAtSend;
    const decisions = items.map((item, i) => {
      const policyResult = result.policies[i] as PolicyAnswer;
      if (provesNow) {
        remember(item.cacheKey, item.cost, policyResult, sentAt, receivedAt);
        // What the fallback starts from if the store stops answering. The report binds until
        // everything counted by the time it arrived has left the window.
        fallback?.note(
          item.cacheKey,
          Math.max(0, policyResult.remaining),
          item.request.windowMs,
          receivedAt,
        );
      }
      return fromStore(item, policyResult);
    });
    const deniedBy =
      result.deniedBy === undefined ? undefined : items[result.deniedBy]?.request.policy;
    return {
      allowed: result.allowed,
      decisions,
      ...(deniedBy !== undefined ? { deniedBy } : {}),
      replayed: result.replayed,
      ...(result.allowed && !result.replayed
        ? {
            receipt: {
              memberId,
              specs,
              policies: items.map((item) => item.request.policy),
              cacheKeys: items.map((item) => item.cacheKey),
              at: result.now,
              ...(requestId !== undefined ? { requestId } : {}),
            },
          }
        : {}),
    };
  }

  async function refund(receipt: RefundReceipt, only?: readonly string[]): Promise<RefundOutcome> {
    const picked = receipt.specs
      .map((spec, i) => ({ spec, policy: receipt.policies[i], cacheKey: receipt.cacheKeys[i] }))
      .filter(({ policy }) => only === undefined || only.includes(policy ?? ""));
    if (picked.length === 0) return { refunded: false, units: [] };
    // This isolate must not go on denying from a claim the refund just made false. (Other
    // isolates may, until their entry expires: at most the Retry-After they announced.) Again
    // when it ends: an answer that arrived in between may have been remembered.
    const forgetPicked = () => {
      capacityEpoch++;
      for (const { cacheKey } of picked) if (cacheKey !== undefined) cache?.forget(cacheKey);
    };
    forgetPicked();
    if (breaker.state === "open") return { refunded: false, units: [], error: "circuit open" };
    // The request-id record belongs to the whole set of policies: a partial refund leaves it,
    // so a retry within the window replays the original admission (and counts nowhere).
    const whole = picked.length === receipt.specs.length;
    try {
      const result = await withinDeadline(options.store, timeoutMs, (store) =>
        onClock(store, (client, at) =>
          storeRefund(client, {
            policies: picked.map(({ spec }) => spec),
            memberId: receipt.memberId,
            at: receipt.at,
            ...(at !== undefined ? { now: at } : {}),
            ...(whole && receipt.requestId !== undefined ? { requestId: receipt.requestId } : {}),
          }),
        ),
      );
      return result;
    } catch (error) {
      options.onStoreError?.(error);
      return { refunded: false, units: [], error: String(error) };
    } finally {
      forgetPicked();
    }
  }

  async function limitAll(
    requests: readonly LimitRequest[],
    requestId?: string,
  ): Promise<MultiDecision> {
    const items = requests.map(itemOf);
    if (items.length === 0) return { allowed: true, decisions: [], replayed: false };
    // Past the caps of config/limits.ts (what one request may make Redis store and do) is the
    // caller's error, thrown to the caller (not a decision in the fail mode): never sent, never
    // a store failure. /check and the config refuse the same earlier, naming the field.
    const bounds = boundsIssue(
      items.map(({ algorithm, cost, request }) => ({ algorithm, cost, limit: request.limit })),
    );
    if (bounds) throw new PolicyBoundsError("limit", bounds.index, bounds.field, bounds.detail);
    try {
      return await decideAll(items, requestId);
    } catch (error) {
      // Only a bug of ours gets here (store errors are handled above); still never throw.
      options.onStoreError?.(error);
      return degraded(items);
    }
  }

  return {
    async limit(request) {
      const { decisions } = await limitAll([request]);
      return decisions[0] as Decision;
    },
    limitAll(requests, limitOptions) {
      return limitAll(requests, limitOptions?.requestId);
    },
    refund(receipt, refundOptions) {
      return refund(receipt, refundOptions?.policies);
    },
    forget(request) {
      // An answer in flight may describe the key before the reset: it must not be remembered.
      capacityEpoch++;
      const key = denialCacheKey(request);
      cache?.forget(key);
      // Nor may the fallback start from a report of the log before the reset.
      fallback?.unnote(key);
    },
  };
}

/** A denied request: named by the denying policy with the longest wait. */
function denied(decisions: Decision[]): MultiDecision {
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
