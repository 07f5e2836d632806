/**
 * The limiter's defaults: the implementation reads them, and config/ fills in LIMITER_CONFIG with
 * them. The two the store also needs are the store's own (store/ imports nothing above it).
 */
import { DEFAULT_UNIT_COST } from "../store/script-inputs";
import { DEFAULT_STORE_TIMEOUT_MS } from "../store/with-deadline";

/** The longest a decision waits for the store (docs/failure-modes.md "Why 500 ms"). */
export const DEFAULT_LIMITER_TIMEOUT_MS = DEFAULT_STORE_TIMEOUT_MS;

/** Prefix of every Redis key the limiter (and analytics) writes. */
export const DEFAULT_PREFIX = "edge-limiter";

/** Units one request consumes. */
export const DEFAULT_COST = DEFAULT_UNIT_COST;

/** What a decision is when the store cannot answer: admitted (the fallback still limits). */
export const DEFAULT_FAIL_MODE = "open";

/** Whose clock orders the log: Redis's TIME, one clock for every isolate. */
export const DEFAULT_CLOCK = "redis";

/** Lease sizing (lease-sizing.ts documents each). */
export const DEFAULT_LEASES = {
  maxLifetimeMs: 1_000,
  minUnits: 2,
  maxShare: 0.25,
  headroom: 1.5,
  maxKeys: 10_000,
} as const;

/** Keys remembered as full per isolate (LRU). */
export const DEFAULT_DENIAL_CACHE_SIZE = 10_000;
/** And the bytes they may occupy (keys at 2 bytes a character plus a fixed cost per entry). */
export const DEFAULT_DENIAL_CACHE_BYTES = 4 * 1024 * 1024;

/** The fallback's memory bounds: admissions over all keys, and keys. */
export const DEFAULT_FALLBACK_MAX_ENTRIES = 100_000;
export const DEFAULT_FALLBACK_MAX_KEYS = 10_000;
/** Bytes each of the fallback's two tables (logs, the store's last reports) may occupy. */
export const DEFAULT_FALLBACK_MAX_BYTES = 4 * 1024 * 1024;

/** Flights in progress per isolate, and the bytes they may hold (single-flight.ts). */
export const DEFAULT_FLIGHT_MAX_ENTRIES = 10_000;
export const DEFAULT_FLIGHT_MAX_BYTES = 2 * 1024 * 1024;

/** Consecutive failures that open the breaker; its first and longest cool-down. */
export const DEFAULT_BREAKER = { failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 30_000 };
