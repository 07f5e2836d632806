/**
 * The local fallback: an exact sliding-window log per key, in this isolate's memory, used only
 * while the store cannot answer. It knows nothing of other isolates (each enforces the limit on
 * its own), but an outage is not a free-for-all.
 */
export interface FallbackLimiterOptions {
  /**
   * Most admissions remembered over all keys (one entry per admitted request, whatever its
   * cost); the least recently used keys are dropped first. Bounds memory to ~16 bytes × this.
   * @default 100000
   */
  maxEntries?: number;
  /**
   * Most keys remembered; the least recently used key is dropped first.
   * @default 10000
   */
  maxKeys?: number;
}

export interface FallbackDecision {
  allowed: boolean;
  remaining: number;
  /** ms until the oldest admission leaves the window (capacity next frees). */
  resetAfterMs: number;
  /** ms until a request of this cost could pass; 0 when allowed. */
  retryAfterMs: number;
}

export interface FallbackLimiter {
  /** Decide and, when allowed, consume `cost`. */
  limit(key: string, limit: number, windowMs: number, cost: number, now: number): FallbackDecision;
  /**
   * What `limit` would decide now, consuming nothing (a multi-policy request checks every policy
   * before it consumes in any). Creates no key and does not touch the LRU order.
   */
  peek(key: string, limit: number, windowMs: number, cost: number, now: number): FallbackDecision;
  readonly keys: number;
  readonly entries: number;
}

export const DEFAULT_FALLBACK_MAX_ENTRIES = 100_000;
export const DEFAULT_FALLBACK_MAX_KEYS = 10_000;

/** Admission times and costs in parallel arrays; `head` skips entries that left the window. */
interface Log {
  times: number[];
  costs: number[];
  head: number;
  used: number;
}

export function createFallbackLimiter(options: FallbackLimiterOptions = {}): FallbackLimiter {
  const maxEntries = options.maxEntries ?? DEFAULT_FALLBACK_MAX_ENTRIES;
  const maxKeys = options.maxKeys ?? DEFAULT_FALLBACK_MAX_KEYS;
  // Insertion-ordered Map as an LRU (delete + set moves a key to the young end).
  const logs = new Map<string, Log>();
  let totalEntries = 0;

  function live(log: Log) {
    return log.times.length - log.head;
  }

  function trim(log: Log, now: number, windowMs: number) {
    // An admission at s is inside the window while now < s + window (as in the Lua script).
    while (log.head < log.times.length && (log.times[log.head] ?? 0) + windowMs <= now) {
      log.used -= log.costs[log.head] ?? 0;
      log.head++;
      totalEntries--;
    }
    if (log.head > 64 && log.head * 2 > log.times.length) {
      log.times = log.times.slice(log.head);
      log.costs = log.costs.slice(log.head);
      log.head = 0;
    }
  }

  function evictFor(key: string) {
    for (const [oldKey, oldLog] of logs) {
      if (logs.size <= maxKeys && totalEntries < maxEntries) return;
      if (oldKey === key) continue;
      totalEntries -= live(oldLog);
      logs.delete(oldKey);
    }
  }

  return {
    limit(key, limit, windowMs, cost, now) {
      let log = logs.get(key);
      if (log) logs.delete(key);
      else log = { times: [], costs: [], head: 0, used: 0 };
      logs.set(key, log);
      trim(log, now, windowMs);

      const oldest = log.times[log.head];
      const resetAfterMs = oldest === undefined ? windowMs : oldest + windowMs - now;
      if (log.used + cost <= limit) {
        evictFor(key);
        // Only if this key alone fills the budget: refuse rather than grow without bound.
        if (totalEntries < maxEntries) {
          log.times.push(now);
          log.costs.push(cost);
          log.used += cost;
          totalEntries++;
          return { allowed: true, remaining: limit - log.used, resetAfterMs, retryAfterMs: 0 };
        }
      }
      return {
        allowed: false,
        remaining: Math.max(0, limit - log.used),
        resetAfterMs,
        retryAfterMs: retryAfter(log, limit, windowMs, cost, now),
      };
    },

    peek(key, limit, windowMs, cost, now) {
      const log = logs.get(key);
      if (!log) {
        const fits = cost <= limit;
        return {
          allowed: fits,
          remaining: fits ? limit - cost : limit,
          resetAfterMs: windowMs,
          retryAfterMs: fits ? 0 : windowMs,
        };
      }
      // Trimming only drops admissions that left the window: what `limit` would do first anyway.
      trim(log, now, windowMs);
      const oldest = log.times[log.head];
      const resetAfterMs = oldest === undefined ? windowMs : oldest + windowMs - now;
      if (log.used + cost <= limit) {
        return { allowed: true, remaining: limit - log.used - cost, resetAfterMs, retryAfterMs: 0 };
      }
      return {
        allowed: false,
        remaining: Math.max(0, limit - log.used),
        resetAfterMs,
        retryAfterMs: retryAfter(log, limit, windowMs, cost, now),
      };
    },

    get keys() {
      return logs.size;
    },

    get entries() {
      return totalEntries;
    },
  };
}

/** When enough of the oldest admissions have left for `cost` to fit (windowMs if it never fits). */
function retryAfter(log: Log, limit: number, windowMs: number, cost: number, now: number): number {
  if (cost > limit) return windowMs;
  let freed = 0;
  const need = log.used + cost - limit;
  for (let i = log.head; i < log.times.length; i++) {
    freed += log.costs[i] ?? 0;
    if (freed >= need) return Math.max(1, (log.times[i] ?? now) + windowMs - now);
  }
  return windowMs;
}
