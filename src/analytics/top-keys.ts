/**
 * The most counted client keys of one rule in one minute (denied, or charged units), in bounded
 * memory: the space-saving
 * algorithm (Metwally et al.). Exact while fewer distinct keys than `capacity` were seen; past
 * that, a new key replaces the least counted one and inherits its count (an overestimate, never
 * an underestimate, of a heavy key: a key denied more than total/capacity times is always kept).
 *
 * Counts may be signed (units charged, then partly given back by a settle): a negative add to a
 * key not held, when full, is dropped (its key's figure stays an overestimate, never an
 * underestimate), and a new key inherits no negative count.
 */
export class TopKeys {
  readonly counts = new Map<string, number>();

  constructor(private readonly capacity: number) {}

  add(key: string, by = 1): void {
    const counts = this.counts;
    const known = counts.get(key);
    if (known !== undefined) {
      counts.set(key, known + by);
      return;
    }
    if (counts.size < this.capacity) {
      counts.set(key, by);
      return;
    }
    if (by < 0) return;
    // Full: evict the least counted key (a scan of `capacity` entries, on denials only).
    let minKey: string | undefined;
    let min = Number.POSITIVE_INFINITY;
    for (const [candidate, count] of counts) {
      if (count < min) {
        min = count;
        minKey = candidate;
      }
    }
    if (minKey !== undefined) counts.delete(minKey);
    counts.set(key, Math.max(min, 0) + by);
  }

  /** The `n` most counted keys, most first. */
  top(n: number): [string, number][] {
    return [...this.counts].sort((a, b) => b[1] - a[1]).slice(0, n);
  }
}
