/**
 * A limiter's long-lived parts and state, built once from its options (createLimiter): the
 * denial cache, the breaker, single flight, the fallback, the clock policy, and the counters
 * the decision and the refund share. Never per request.
 */
import type { FenceView } from "../store/placement-fence";
import type { ScriptClient } from "../store/script-runner";
import { type CircuitBreaker, createCircuitBreaker } from "./circuit-breaker";
import { createStoreClock, type StoreClock } from "./clock-policy";
import {
  DEFAULT_BREAKER,
  DEFAULT_CLOCK,
  DEFAULT_FAIL_MODE,
  DEFAULT_LIMITER_TIMEOUT_MS,
  DEFAULT_PREFIX,
} from "./defaults";
import { createDegradationLog } from "./degradation-log";
import { createDenialCache, type DenialCache } from "./denial-cache";
import { createFallbackLimiter, type FallbackLimiter } from "./fallback-limiter";
import type { StoreLimiterOptions } from "./limiter-options";
import { createLocalSlots, type LocalSlots } from "./local-slots";
import { createSingleFlight, type SingleFlight } from "./single-flight";
import type { FailMode } from "./types";

export interface LimiterContext {
  readonly store: ScriptClient;
  /** Prefix of every Redis key. */
  readonly prefix: string;
  /** The longest a decision (or a refund) waits for the store. */
  readonly timeoutMs: number;
  /** The isolate clock (ms). */
  readonly now: () => number;
  readonly defaultFailMode: FailMode;
  readonly cache: DenialCache | undefined;
  /** Single flight, or undefined when off. */
  readonly flights: SingleFlight | undefined;
  readonly fallback: FallbackLimiter | undefined;
  readonly fallbackFraction: number;
  /** Concurrency slots counted in this isolate while the store is down (local-slots.ts). */
  readonly localSlots: LocalSlots;
  readonly breaker: CircuitBreaker;
  readonly clock: StoreClock;
  readonly onStoreError: ((error: unknown) => void) | undefined;
  /** A shard's: the placement its calls at `t` place keys by (StoreLimiterOptions). */
  readonly placementView: ((t: number) => FenceView) | undefined;
  /**
   * Bumped when a refund or a forget (an admin reset) starts and when a refund ends. Both free
   * capacity, which breaks the cache's premise (only time frees it): a store answer whose call
   * overlapped one may describe the log before it, so it is not remembered (they are rare).
   */
  capacityEpoch: number;
  /**
   * When (isolate clock) the store last answered a call: a timeout of a call sent before that is
   * a slow store, not a dead one (see store-limiter.ts).
   */
  lastAnswerAt: number;
}

export function createLimiterContext(options: StoreLimiterOptions): LimiterContext {
  const timeoutMs = options.timeoutMs ?? DEFAULT_LIMITER_TIMEOUT_MS;
  const now = options.now ?? Date.now;
  const cacheOption = options.denialCache ?? {};
  const fallbackOption = options.fallback ?? {};
  // The default log speaks for the hooks not given (beside them too with `log: true`): a
  // degraded store must never be silent.
  const always = options.log === true;
  const log =
    options.log === false || (!always && options.onBreakerChange && options.onStoreError)
      ? undefined
      : createDegradationLog({
          store: options.store,
          failMode: options.failMode ?? DEFAULT_FAIL_MODE,
          fallback: fallbackOption !== false,
          everyMs: options.breaker?.cooldownMs ?? DEFAULT_BREAKER.cooldownMs,
          now,
        });
  const onBreakerChange = alongside(options.onBreakerChange, log?.onBreakerChange, always);
  const onStoreError = alongside(options.onStoreError, log?.onStoreError, always);
  return {
    store: options.store,
    prefix: options.prefix ?? DEFAULT_PREFIX,
    timeoutMs,
    now,
    defaultFailMode: options.failMode ?? DEFAULT_FAIL_MODE,
    cache:
      cacheOption === false
        ? undefined
        : "lookup" in cacheOption
          ? cacheOption
          : createDenialCache(cacheOption),
    // One store call in flight per cache key; a flight is trusted to settle only until the
    // decision's deadline (see single-flight.ts).
    flights: (options.singleFlight ?? true) ? createSingleFlight({ timeoutMs, now }) : undefined,
    fallback:
      fallbackOption === false
        ? undefined
        : (fallbackOption.limiter ?? createFallbackLimiter(fallbackOption)),
    fallbackFraction: fallbackOption === false ? 0 : (fallbackOption.fraction ?? 1),
    localSlots: options.localSlots ?? createLocalSlots(),
    breaker: createCircuitBreaker({
      // A probe is lost if it has not reported within twice the decision's own deadline.
      probeTimeoutMs: 2 * timeoutMs,
      ...options.breaker,
      now,
      ...(onBreakerChange ? { onStateChange: onBreakerChange } : {}),
    }),
    clock: createStoreClock({
      store: options.store,
      clock: options.clock ?? DEFAULT_CLOCK,
      now,
      onClockChange: options.onClockChange,
    }),
    onStoreError,
    placementView: options.placementView,
    capacityEpoch: 0,
    lastAnswerAt: Number.NEGATIVE_INFINITY,
  };
}

/**
 * Capacity of these keys was freed outside the store's view of time (a refund, an admin reset):
 * this isolate stops denying from claims that are now false, and an answer in flight, which may
 * describe the keys before it, is not remembered (capacityEpoch).
 */
export function capacityFreed(ctx: LimiterContext, cacheKeys: Iterable<string>): void {
  ctx.capacityEpoch++;
  for (const key of cacheKeys) ctx.cache?.forget(key);
}

/** The caller's hook; the default's when none is given, or both with `log: true`. */
function alongside<T>(
  given: ((value: T) => void) | undefined,
  fallback: ((value: T) => void) | undefined,
  both: boolean,
): ((value: T) => void) | undefined {
  if (!given || !fallback) return given ?? fallback;
  if (!both) return given;
  return (value) => {
    fallback(value);
    given(value);
  };
}
