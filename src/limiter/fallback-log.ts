/**
 * One key's log in the local fallback limiter (fallback-limiter.ts): its admissions, and when
 * enough of them have left the window for a cost to fit.
 */

/** Admission times and costs in parallel arrays; `head` skips entries that left the window. */
export interface Log {
  times: number[];
  costs: number[];
  head: number;
  used: number;
  /** When its last admission leaves the window: from then on it holds nothing. */
  emptyAt: number;
}

/** When enough of the oldest admissions have left for `cost` to fit (windowMs if it never fits). */
export function retryAfter(
  log: Log,
  limit: number,
  windowMs: number,
  cost: number,
  now: number,
): number {
  if (cost > limit) return windowMs;
  let freed = 0;
  const need = log.used + cost - limit;
  for (let i = log.head; i < log.times.length; i++) {
    freed += log.costs[i] ?? 0;
    if (freed >= need) return Math.max(1, (log.times[i] ?? now) + windowMs - now);
  }
  return windowMs;
}
