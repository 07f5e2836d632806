/**
 * The caps on what one request may make Redis store and do, and the one check of them
 * (boundsIssue): the store refuses a call past them before Redis is asked; the limiter, /check
 * and the config refuse the same earlier, naming the field. config/limits.ts re-exports them
 * with the other documented bounds (docs/check-api.md "Limits").
 */
import {
  ALGORITHMS,
  type Algorithm,
  isConcurrency,
  USAGE_ALGORITHMS,
  unknownAlgorithm,
} from "./algorithm";

/**
 * The shortest and longest window (ms), the config's and /check's too (config/limits.ts
 * re-exports them). Past 7 days the request-id records and reset marks (keys.ts
 * RECORD_TTL_MAX_MS) no longer cover the window; far past it the scripts' own arithmetic
 * fails in Redis (every call a store error).
 */
export const MIN_WINDOW_MS = 1;
export const MAX_WINDOW_MS = 7 * 86_400_000;

/**
 * The longest window of a calendar policy (its longest period, a month of 31 days across a DST
 * change). A request id's record still lasts at most RECORD_TTL_MAX_MS: a retry is seconds
 * after its request, not weeks.
 */
const MAX_PERIOD_MS = 31 * 86_400_000 + 3_600_000;

/**
 * The largest limit of the O(1) algorithms (fixed-window, sliding-counter, token-bucket): a
 * counter or a time whatever the limit (~120 B per key), so this only keeps numbers sane.
 */
export const MAX_LIMIT = 100_000;

// What one request may make Redis store and do. The ring (sliding-log) keeps 4 bytes a unit of
// its limit, and writes a request's units as one string command. (The seeds' sorted set, retired,
// kept one ~120-byte member per unit and capped the limit at 8 000: docs/algorithms.md.)

/**
 * The largest limit of the weighted log (sliding-log-weighted): usage rules count tokens, rows or
 * bytes, and its memory grows with requests, not units. Sums stay exact in Redis's Lua numbers
 * (doubles) far past it.
 */
export const MAX_USAGE_LIMIT = 1_000_000_000_000;

/**
 * How long after its admission a usage request on a fixed window or a calendar period can be
 * settled (docs/usage.md): its once-gate key (~100 bytes) lives until then at most, or until its
 * window or period ends, so a month's quota keeps a day's settled requests, not a month's. A
 * settle later than this charges nothing, as one after its period ended: the reservation stands.
 */
export const MAX_SETTLE_AGE_MS = 86_400_000;

/**
 * The most admissions a weighted log holds in its window (one entry each, ~50 bytes): ~500 kB
 * full, as the ring at its largest limit. A request past them is denied until the oldest
 * leaves (a usage rule's limit is its units; this bounds its requests, whatever their units).
 */
export const MAX_WEIGHTED_ENTRIES = 10_000;

/**
 * The most units one call may write to rings (sliding-log), summed over its ring policies, each
 * counted up to its limit (a cost above it is a denial that writes nothing): 4 bytes a unit, one
 * string command, ~8 ms of Redis at 100 000 (`node bench/measure/caps-bench.mjs`; 16 policies of
 * 1 000 took 1.5 ms).
 */
export const MAX_RING_COST = 100_000;

/**
 * The most slots a concurrency key may hold: one sorted-set member each (~100 bytes), and the
 * script trims and counts them on every acquire.
 */
const MAX_CONCURRENCY_LIMIT = 10_000;

/**
 * The longest a concurrency slot lives unreleased (its policy's `windowMs`): a holder that died
 * keeps its slot that long, so a day is already more than any request should take.
 */
export const MAX_CONCURRENCY_TIMEOUT_MS = 86_400_000;

/** A concurrency slot's timeout when a rule names none. */
export const DEFAULT_CONCURRENCY_TIMEOUT_MS = 60_000;

/**
 * The largest limit an algorithm takes: a full sliding log is memory, an O(1) key is not. A
 * usage rule (`usage` truthy) on a fixed window or a calendar period counts units (tokens) in
 * one number, exact in Lua's doubles to 2^53, so it takes MAX_USAGE_LIMIT as the weighted log.
 */
export function maxLimitOf(algorithm: Algorithm, usage?: unknown): number {
  if (isConcurrency(algorithm)) return MAX_CONCURRENCY_LIMIT;
  return algorithm === "sliding-log-weighted" || (usage && USAGE_ALGORITHMS.has(algorithm))
    ? MAX_USAGE_LIMIT
    : MAX_LIMIT;
}

/** How a limit past maxLimitOf(algorithm, usage) is refused, the same wherever it is. */
export function limitRange(algorithm: Algorithm, usage?: unknown): string {
  if (isConcurrency(algorithm)) {
    return `must be an integer from 1 to ${MAX_CONCURRENCY_LIMIT} for a concurrency rule (requests in flight per key)`;
  }
  if (algorithm === "sliding-log-weighted") {
    return `must be an integer from 1 to ${MAX_USAGE_LIMIT} for the sliding-log-weighted`;
  }
  if (usage && USAGE_ALGORITHMS.has(algorithm)) {
    return `must be an integer from 1 to ${MAX_USAGE_LIMIT} for a usage rule`;
  }
  return `must be an integer from 1 to ${MAX_LIMIT}`;
}

/** How a concurrency cost other than 1 is refused: a request holds one slot. */
const CONCURRENCY_COST = "must be 1 for a concurrency rule (a request holds one slot)";

/** A policy as the caps see it. */
export interface BoundedPolicy {
  algorithm: Algorithm;
  limit: number;
  cost: number;
  /** Truthy for a usage rule's policy (its limit is units: maxLimitOf). */
  usage?: unknown;
}

/**
 * The first policy of one call past a cap: its limit (maxLimitOf), its cost (a positive
 * integer), or the call's summed sliding-log cost (MAX_RING_COST). One function for /check, LIMITER_CONFIG
 * (every rule one request could match) and the store (which refuses before calling Redis).
 */
export function boundsIssue(
  policies: readonly BoundedPolicy[],
): { index: number; field: "limit" | "cost"; detail: string } | undefined {
  let ringCost = 0;
  for (const [index, { algorithm, limit, cost, usage }] of policies.entries()) {
    if (!isIntegerIn(limit, 1, maxLimitOf(algorithm, usage))) {
      return { index, field: "limit", detail: limitRange(algorithm, usage) };
    }
    // Not capped at the limit here: a cost above it is a denial the scripts answer (never fits);
    // /check and the config refuse it as an error themselves.
    if (!isIntegerIn(cost, 1, Number.MAX_SAFE_INTEGER)) {
      return { index, field: "cost", detail: "must be a positive integer" };
    }
    if (isConcurrency(algorithm) && cost !== 1) {
      return { index, field: "cost", detail: CONCURRENCY_COST };
    }
    if (algorithm === "sliding-log") {
      ringCost += Math.min(cost, limit);
      if (ringCost > MAX_RING_COST) {
        return {
          index,
          field: "cost",
          detail: `brings the sliding-log costs decided in one call to ${ringCost}: at most ${MAX_RING_COST} (4 bytes written per unit)`,
        };
      }
    }
  }
  return undefined;
}

/** A policy as the store takes it: the caps' fields, the algorithm checked too, and its window. */
export interface StoreBoundedPolicy extends BoundedPolicy {
  windowMs: number;
}

/**
 * The first field of one call's policies the store must not be asked with: an algorithm it does
 * not implement or a window outside MIN_WINDOW_MS..MAX_WINDOW_MS (integer ms), then boundsIssue's
 * caps. Callers in plain JS may pass anything (a string, NaN, `-5`, `1e12`): each is refused
 * here, before Redis is asked, never a store error.
 */
export function storePolicyIssue(
  policies: readonly StoreBoundedPolicy[],
):
  | { index: number; field: "algorithm" | "windowMs" | "limit" | "cost"; detail: string }
  | undefined {
  for (let index = 0; index < policies.length; index++) {
    const { algorithm, windowMs } = policies[index] as StoreBoundedPolicy;
    if (!(ALGORITHMS as readonly unknown[]).includes(algorithm)) {
      return { index, field: "algorithm", detail: unknownAlgorithm(algorithm) };
    }
    // A calendar period's window is its longest length (a month: 31 days and an hour).
    const longest = algorithm === "calendar" ? MAX_PERIOD_MS : MAX_WINDOW_MS;
    if (!isIntegerIn(windowMs, MIN_WINDOW_MS, longest)) {
      return { index, field: "windowMs", detail: WINDOW_RANGE };
    }
    if (isConcurrency(algorithm) && windowMs > MAX_CONCURRENCY_TIMEOUT_MS) {
      return { index, field: "windowMs", detail: TIMEOUT_RANGE };
    }
  }
  return boundsIssue(policies);
}

/** How a concurrency timeout (its policy's windowMs) outside the bounds is refused. */
const TIMEOUT_RANGE = `must be a concurrency slot's timeout: an integer of ms from ${MIN_WINDOW_MS} to ${MAX_CONCURRENCY_TIMEOUT_MS} (1 day)`;

/** How a window outside the bounds is refused. */
const WINDOW_RANGE = `must be an integer of ms from ${MIN_WINDOW_MS} to ${MAX_WINDOW_MS} (7 days)`;

// Callers in plain JS may pass anything: a non-number is past every cap.
function isIntegerIn(value: unknown, min: number, max: number): boolean {
  return typeof value === "number" && Number.isInteger(value) && value >= min && value <= max;
}
