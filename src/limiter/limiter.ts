import { storageKey } from "../store/keys";
import type { ScriptClient } from "../store/script-runner";
import { type StoreResult, slidingLog } from "../store/sliding-log";
import {
  type BreakerEvent,
  type CircuitBreakerOptions,
  createCircuitBreaker,
  type Permit,
} from "./circuit-breaker";
import type { Decision } from "./decision";
import {
  createDenialCache,
  type DenialCache,
  type DenialCacheOptions,
  type Exhaustion,
} from "./denial-cache";
import {
  createFallbackLimiter,
  type FallbackLimiter,
  type FallbackLimiterOptions,
} from "./fallback-limiter";
import { nextMemberId } from "./member-id";
import { StoreTimeoutError, withDeadline } from "./with-deadline";

export type FailMode = "open" | "closed";
export type Clock = "redis" | "caller";

export interface FallbackOptions extends FallbackLimiterOptions {
  /**
   * Share of the rule's limit each isolate admits on its own while the store is down.
   * @default 1
   */
  fraction?: number;
  /** An existing fallback limiter (to share or inspect it); otherwise one is created. */
  limiter?: FallbackLimiter;
}

export interface LimiterOptions {
  /** The Redis client (any object with `evalsha` and `eval` of `@upstash/redis`). */
  store: ScriptClient;
  /**
   * Prefix of every Redis key the limiter writes.
   * @default "edge-limiter"
   */
  prefix?: string;
  /**
   * Whose clock orders the log: `"redis"` (TIME inside the script: one clock for every isolate)
   * or `"caller"` (this isolate's clock, passed to the script; for stores that reject
   * non-deterministic scripts).
   * @default "redis"
   */
  clock?: Clock;
  /**
   * What to decide when the store cannot answer (timeout, network error, 5xx, garbage) or the
   * breaker is open: `"open"` admits (through the fallback limiter when it is on), `"closed"`
   * denies. A request's own `failMode` wins.
   * @default "open"
   */
  failMode?: FailMode;
  /**
   * The longest a decision waits for the store. Give the store client the same timeout (see
   * createStoreClient): it aborts the HTTP request, this bounds the whole decision (EVALSHA plus
   * a NOSCRIPT → EVAL).
   * @default 500
   */
  timeoutMs?: number;
  /**
   * The per-isolate denial cache: its options, an existing cache (to inspect it), or `false`.
   * @default { maxEntries: 10000 }
   */
  denialCache?: DenialCacheOptions | DenialCache | false;
  /**
   * The local limiter used in fail-open mode while the store is down; `false` admits everything
   * instead. @default { fraction: 1 }
   */
  fallback?: FallbackOptions | false;
  /** Circuit breaker thresholds. @default { failureThreshold: 3, cooldownMs: 1000, maxCooldownMs: 30000 } */
  breaker?: Omit<CircuitBreakerOptions, "now" | "onStateChange">;
  /**
   * Concurrent checks of a key that was exhausted at its last answer wait for the one store call
   * in flight and are denied from its answer when it still denies them (exact), instead of each
   * calling the store.
   * @default true
   */
  singleFlight?: boolean;
  /** The isolate's clock (ms); injectable for tests. @default Date.now */
  now?: () => number;
  /** Called with every store error (for metrics); never throws into the decision. */
  onStoreError?: (error: unknown) => void;
  /** One structured event per breaker state change (the worker logs it as one JSON line). */
  onBreakerChange?: (event: BreakerEvent) => void;
}

export interface LimitRequest {
  /** Policy (rule) name: part of the Redis key and of the headers. [A-Za-z0-9_.-]+ */
  policy: string;
  /** The client key (IP, API key, user id…): any string. */
  key: string;
  limit: number;
  windowMs: number;
  /** @default 1 */
  cost?: number;
  /** Per-request override of the limiter's fail mode. */
  failMode?: FailMode;
}

export interface Limiter {
  /** Decide one request. Never throws: store failures become fail-open / fail-closed decisions. */
  limit(request: LimitRequest): Promise<Decision>;
}

export const DEFAULT_LIMITER_TIMEOUT_MS = 500;
/** Retry-After of a fail-closed denial when the breaker gives no better estimate. */
const FAIL_CLOSED_RETRY_MS = 1_000;

/** A cache entry plus the upper bound of when it frees (for Retry-After, never early). */
interface Remembered extends Exhaustion {
  retryAt: number;
}

/**
 * The key a request has in the denial cache and the fallback limiter (for `forget` after a reset).
 * The limit and window are part of it: ad-hoc checks of one policy may differ in limit.
 */
export function denialCacheKey(
  request: Pick<LimitRequest, "policy" | "key" | "limit" | "windowMs">,
) {
  return `${request.policy}\n${request.limit}\n${request.windowMs}\n${request.key}`;
}

export function createLimiter(options: LimiterOptions): Limiter {
  const prefix = options.prefix ?? "edge-limiter";
  const clock = options.clock ?? "redis";
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
    ...options.breaker,
    now,
    onStateChange: options.onBreakerChange,
  });
  // One store call in flight per cache key, for single flight. Settles, never rejects.
  const inFlight = new Map<string, Promise<void>>();

  async function callStore(request: LimitRequest, cost: number, sentAt: number) {
    return withDeadline(timeoutMs, (expired) => {
      // After the deadline the decision is already made: a NOSCRIPT → EVAL must not start then.
      const guarded: ScriptClient = {
        evalsha: (sha, keys, args) => options.store.evalsha(sha, keys, args),
        eval: (script, keys, args) =>
          expired()
            ? Promise.reject(new StoreTimeoutError(timeoutMs))
            : options.store.eval(script, keys, args),
      };
      return slidingLog(guarded, {
        key: storageKey(prefix, request.policy, request.key),
        limit: request.limit,
        windowMs: request.windowMs,
        cost,
        memberId: nextMemberId(),
        now: clock === "caller" ? sentAt : undefined,
      });
    });
  }

  /** Remembers what the answer proves about later requests of this key (see denial-cache.ts). */
  function remember(cacheKey: string, cost: number, result: StoreResult, sentAt: number) {
    if (!cache) return;
    const receivedAt = now();
    // The store decided between sentAt and receivedAt (isolate clock). Converting with the
    // relative wait from sentAt is never late, so the cache never denies what the store admits;
    // from receivedAt it is never early, which is what Retry-After must be.
    const wait = result.allowed ? result.reset - result.now : result.retryAfterMs;
    const entry: Remembered = {
      // Denied: this cost and more, until capacity for it frees. Admitted with too little left
      // for another of this cost: every cost above what remains, until the oldest member leaves.
      minCost: result.allowed ? result.remaining + 1 : cost,
      remaining: Math.max(0, result.remaining),
      until: sentAt + wait,
      retryAt: receivedAt + wait,
    };
    if (result.allowed && result.remaining >= cost) cache.forget(cacheKey);
    else if (wait > 0) cache.remember(cacheKey, entry, receivedAt);
  }

  function fromCache(request: LimitRequest, entry: Remembered, at: number): Decision {
    const retryAfterMs = Math.max(1, entry.retryAt - at);
    return {
      allowed: false,
      limit: request.limit,
      remaining: entry.remaining,
      reset: at + retryAfterMs,
      resetAfterMs: retryAfterMs,
      retryAfterMs,
      source: "cache",
      policy: request.policy,
      windowMs: request.windowMs,
    };
  }

  /** The store did not answer (or was not asked): fallback, fail open, or fail closed. */
  function degraded(request: LimitRequest, cacheKey: string, cost: number): Decision {
    const base = { limit: request.limit, policy: request.policy, windowMs: request.windowMs };
    const at = now();
    if ((request.failMode ?? defaultFailMode) === "closed") {
      const retryAfterMs = breaker.retryAfterMs || FAIL_CLOSED_RETRY_MS;
      return {
        ...base,
        allowed: false,
        remaining: 0,
        reset: at + retryAfterMs,
        resetAfterMs: retryAfterMs,
        retryAfterMs,
        source: "fail-closed",
      };
    }
    if (fallback) {
      const limit = Math.max(1, Math.floor(request.limit * fallbackFraction));
      const local = fallback.limit(cacheKey, limit, request.windowMs, cost, at);
      return {
        ...base,
        allowed: local.allowed,
        remaining: local.remaining,
        reset: at + local.resetAfterMs,
        resetAfterMs: local.resetAfterMs,
        retryAfterMs: local.retryAfterMs,
        source: "fallback",
      };
    }
    return {
      ...base,
      allowed: true,
      remaining: Math.max(0, request.limit - cost),
      reset: at + request.windowMs,
      resetAfterMs: request.windowMs,
      retryAfterMs: 0,
      source: "fail-open",
    };
  }

  async function decide(request: LimitRequest): Promise<Decision> {
    const cost = request.cost ?? 1;
    const cacheKey = denialCacheKey(request);

    let lookup = cache?.lookup(cacheKey, cost, now());
    if (lookup?.hit) return fromCache(request, lookup.entry as Remembered, now());
    const pending = singleFlight && lookup?.exhausted ? inFlight.get(cacheKey) : undefined;
    if (pending) {
      await pending;
      lookup = cache?.lookup(cacheKey, cost, now());
      if (lookup?.hit) return fromCache(request, lookup.entry as Remembered, now());
    }

    const permit: Permit = breaker.acquire();
    if (permit === "skip") return degraded(request, cacheKey, cost);

    const sentAt = now();
    const call = callStore(request, cost, sentAt);
    if (singleFlight) {
      const settled = call.then(
        () => undefined,
        () => undefined,
      );
      inFlight.set(cacheKey, settled);
      void settled.then(() => {
        if (inFlight.get(cacheKey) === settled) inFlight.delete(cacheKey);
      });
    }
    let result: StoreResult;
    try {
      result = await call;
    } catch (error) {
      breaker.failure(permit, error);
      options.onStoreError?.(error);
      return degraded(request, cacheKey, cost);
    }
    breaker.success(permit);
    remember(cacheKey, cost, result, sentAt);
    return {
      allowed: result.allowed,
      limit: request.limit,
      remaining: Math.max(0, result.remaining),
      reset: result.reset,
      resetAfterMs: Math.max(0, result.reset - result.now),
      retryAfterMs: result.retryAfterMs,
      source: "redis",
      policy: request.policy,
      windowMs: request.windowMs,
    };
  }

  return {
    async limit(request) {
      try {
        return await decide(request);
      } catch (error) {
        // Only a bug of ours gets here (store errors are handled above); still never throw.
        options.onStoreError?.(error);
        return degraded(request, denialCacheKey(request), request.cost ?? 1);
      }
    },
  };
}
