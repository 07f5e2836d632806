/**
 * The counting algorithms the store implements, each as a Lua fragment composed into the scripts
 * (see lua/scripts.ts). Which to use when: docs/algorithms.md. Config, /check and the public
 * surface read the list from here.
 *
 * - `sliding-log`: exact; the last `limit` admission times in a ring (4 bytes per unit of the limit).
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
 * - `calendar`: a quota per day, week or month in a timezone (docs/calendar-quotas.md), O(1): a
 *   count per period, reset when the next period starts; a rule names it with `period`.
 */
export const ALGORITHMS = [
  "sliding-log",
  "sliding-log-weighted",
  "fixed-window",
  "sliding-counter",
  "token-bucket",
  "concurrency",
  "calendar",
] as const;

/**
 * Derived from the list: adding an algorithm is one entry here plus its Lua fragment file, which
 * the compiler then demands in lua/scripts.ts (FRAGMENTS is a Record<Algorithm, string>).
 */
export type Algorithm = (typeof ALGORITHMS)[number];

/**
 * The algorithms that count a rate (units per window): all but concurrency, which counts requests
 * in flight (its window is a slot's timeout; a request holds one slot), and calendar, which
 * counts per calendar period (a rule's `period`, not a `window`).
 */
export const RATE_ALGORITHMS: readonly Algorithm[] = ALGORITHMS.filter(
  (algorithm) => algorithm !== "concurrency" && algorithm !== "calendar",
);

/** The exact log is the default: the product's promise is exactness. */
export const DEFAULT_ALGORITHM: Algorithm = "sliding-log";

/**
 * Algorithms once offered and retired, with what the refusal of a config or call naming one says
 * (schema-parts.ts, caps.ts): the name alone would read as a typo.
 */
const RETIRED_ALGORITHMS: Readonly<Record<string, string>> = {
  // The seeds' sorted set (one member per unit, ~120 B each) kept the very log the ring keeps in
  // 4 B a unit with fewer commands (docs/algorithms.md "Why a ring").
  "sliding-log-zset":
    'was retired in 0.x: use "sliding-log", the same exact sliding-window log kept in a ring (docs/algorithms.md)',
};

/** How an algorithm that is not offered is refused: a retired one says what replaced it. */
export function unknownAlgorithm(value: unknown): string {
  const retired = typeof value === "string" ? RETIRED_ALGORITHMS[value] : undefined;
  if (retired !== undefined) return `"${value}" ${retired}`;
  return `must be one of ${ALGORITHMS.map((a) => `"${a}"`).join(", ")}`;
}

/**
 * The exact log (a ring: sliding-log-ring.lua.ts). Its key has no algorithm suffix (storageKey):
 * the one it always had.
 */
export function isLogAlgorithm(algorithm: Algorithm): boolean {
  return algorithm === "sliding-log";
}

/**
 * The algorithms a lease is exact for: the log, whose admissions are times that can be stamped in
 * the future and whose slots a lease can give back exactly. The O(1) algorithms count, not
 * stamp: a future stamp means nothing to them, so `lease: true` with one of them is refused by
 * the config, /check and the middleware (and ignored by the limiter: decided by the store).
 */
export const LEASABLE: ReadonlySet<Algorithm> = new Set<Algorithm>(
  ALGORITHMS.filter(isLogAlgorithm),
);

/**
 * The algorithms a usage rule counts in (docs/usage.md), each settled once per request: the
 * weighted log by the request's own entry, a fixed window and a calendar period by a once-gate
 * and a signed give-back into the window or period it was counted in (lua/settle-driver.lua.ts).
 * The token bucket and the sliding counter are not: see USAGE_NEEDS_COUNT (config/usage-schema.ts).
 */
export const USAGE_ALGORITHMS: ReadonlySet<Algorithm> = new Set<Algorithm>([
  "sliding-log-weighted",
  "fixed-window",
  "calendar",
]);

/**
 * Concurrency policies count requests in flight, not in a window: their `windowMs` is a slot's
 * timeout, their cost is one slot, and nothing about a denial stays true once any holder releases
 * (so a denial is never cached, leased or decided in a region).
 */
export function isConcurrency(algorithm: Algorithm): boolean {
  return algorithm === "concurrency";
}
