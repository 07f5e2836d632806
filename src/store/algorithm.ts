/**
 * The counting algorithms the store implements, each as a Lua fragment composed into the scripts
 * (see lua/scripts.ts). Which to use when: README "Algorithms". Config, /check and the public
 * surface read the list from here.
 *
 * - `sliding-log`: exact; one sorted-set member per admitted unit (memory grows with the limit).
 * - `fixed-window`: aligned windows, O(1); allows up to 2× the limit across a window boundary.
 * - `sliding-counter`: two-window weighted approximation, O(1); assumes the previous window's
 *   admissions were spread evenly over it.
 * - `token-bucket`: GCRA, O(1); bursts up to `limit`, refilled continuously at `limit` per window.
 */
export const ALGORITHMS = [
  "sliding-log",
  "fixed-window",
  "sliding-counter",
  "token-bucket",
] as const;

/**
 * Derived from the list: adding an algorithm is one entry here plus its Lua fragment file, which
 * the compiler then demands in lua/scripts.ts (FRAGMENTS is a Record<Algorithm, string>).
 */
export type Algorithm = (typeof ALGORITHMS)[number];

/** The exact log is the default: the product's promise is exactness. */
export const DEFAULT_ALGORITHM: Algorithm = "sliding-log";
