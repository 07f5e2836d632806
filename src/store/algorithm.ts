/**
 * The counting algorithms the store implements, each as a Lua fragment composed into the scripts
 * (see lua/scripts.ts). Which to use when: docs/algorithms.md. Config, /check and the public
 * surface read the list from here.
 *
 * - `sliding-log`: exact; the last `limit` admission times in a ring (4 bytes per unit of the limit).
 * - `sliding-log-zset`: the same exact log in a sorted set, one member per admitted unit (the seeds'
 *   design: ~120 bytes per unit, more commands; kept selectable and measured side by side).
 * - `sliding-log-weighted`: exact; one entry per admission with its units (memory per request
 *   in the window, not per unit): what usage rules count in, their reservations settled later
 *   (lua/weighted-log.lua.ts); limits up to 10^12.
 * - `fixed-window`: aligned windows, O(1); allows up to 2× the limit across a window boundary.
 * - `sliding-counter`: two-window weighted approximation, O(1); assumes the previous window's
 *   admissions were spread evenly over it.
 * - `token-bucket`: GCRA, O(1); bursts up to `limit`, refilled continuously at `limit` per window.
 * - `concurrency`: at most `limit` requests in flight per key (docs/concurrency.md): a slot per
 *   request, a sorted-set member scored by its expiry, given back when the request ends; the
 *   policy's window is the slot's timeout.
 */
export const ALGORITHMS = [
  "sliding-log",
  "sliding-log-zset",
  "sliding-log-weighted",
  "fixed-window",
  "sliding-counter",
  "token-bucket",
  "concurrency",
] as const;

/**
 * Derived from the list: adding an algorithm is one entry here plus its Lua fragment file, which
 * the compiler then demands in lua/scripts.ts (FRAGMENTS is a Record<Algorithm, string>).
 */
export type Algorithm = (typeof ALGORITHMS)[number];

/**
 * The algorithms that count a rate (units per window): all but concurrency, which counts requests
 * in flight (its window is a slot's timeout; a request holds one slot).
 */
export const RATE_ALGORITHMS: readonly Algorithm[] = ALGORITHMS.filter(
  (algorithm) => algorithm !== "concurrency",
);

/** The exact log is the default: the product's promise is exactness. */
export const DEFAULT_ALGORITHM: Algorithm = "sliding-log";

/**
 * The exact logs: both layouts share one key (storageKey), and each converts the other's state
 * when it meets it, so a rule moving between them never forgets an admission in the window.
 */
export function isLogAlgorithm(algorithm: Algorithm): boolean {
  return algorithm === "sliding-log" || algorithm === "sliding-log-zset";
}

/**
 * The algorithms a lease is exact for: the logs (both layouts), whose admissions are times that can be stamped in
 * the future and whose members a lease can give back exactly. The O(1) algorithms count, not
 * stamp: a future stamp means nothing to them, so `lease: true` with one of them is refused by
 * the config, /check and the middleware (and ignored by the limiter: decided by the store).
 */
export const LEASABLE: ReadonlySet<Algorithm> = new Set<Algorithm>(
  ALGORITHMS.filter(isLogAlgorithm),
);

/**
 * Concurrency policies count requests in flight, not in a window: their `windowMs` is a slot's
 * timeout, their cost is one slot, and nothing about a denial stays true once any holder releases
 * (so a denial is never cached, leased or decided in a region).
 */
export function isConcurrency(algorithm: Algorithm): boolean {
  return algorithm === "concurrency";
}
