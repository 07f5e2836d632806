/**
 * The denial cache: per isolate, what the store proved about keys it found full, so a request it
 * would deny is denied with no round trip; and the arithmetic that turns a store answer into
 * such a claim (rememberAnswer).
 */

import { stringBytes } from "../owned-string";
import type { PolicyAnswer } from "../store/evaluate";
import { DEFAULT_DENIAL_CACHE_BYTES, DEFAULT_DENIAL_CACHE_SIZE } from "./defaults";

/**
 * What the store said about one (policy, limit, window, client key): every request costing at
 * least `minCost` is denied until `until` (isolate clock, ms).
 *
 * Exact for the sliding log: only time frees capacity (other requests can only add members), so
 * a claim that was true when the store decided stays true until the instant it names.
 */
export interface Exhaustion {
  /** The smallest cost this entry denies (remaining + 1 or the denied cost, whichever applies). */
  minCost: number;
  /** What the store reported as remaining when it decided (a cached decision repeats it). */
  remaining: number;
  /** Isolate-clock ms until which a cost ≥ minCost is denied. */
  until: number;
  /**
   * When a denied client may retry (Retry-After): never earlier than capacity frees, so it may
   * be later than `until` (measured from when the answer arrived, not when it was asked).
   * @default until
   */
  retryAt?: number;
  /** The limit the store decided by, when it was not the policy's (a limit override). */
  limit?: number;
}

type CacheLookup =
  | { hit: true; entry: Exhaustion }
  /** `exhausted`: the key was exhausted at its last answer (even if that claim has expired). */
  | { hit: false; exhausted: boolean };

export interface DenialCacheOptions {
  /**
   * Most keys remembered per isolate; the least recently used entry leaves first. 0 disables it.
   * @default 10000
   */
  maxEntries?: number;
  /**
   * Most bytes its entries may occupy (keys at 2 bytes a character, plus ENTRY_BYTES each); the
   * least recently used leave first. Keys are at most a few hundred characters (bounded-key.ts),
   * so at the default this only bites for keys longer than ~280 characters on average.
   * @default 4 MiB
   */
  maxBytes?: number;
}

/** What an entry costs besides its key: the Map slot, the Exhaustion and its numbers. */
const DENIAL_ENTRY_BYTES = 160;

export interface DenialCache {
  /** Whether a request of `cost` at `now` is denied from memory. O(1). */
  lookup(key: string, cost: number, now: number): CacheLookup;
  /** Records a store answer that denies costs ≥ `entry.minCost` until `entry.until`. O(1). */
  remember(key: string, entry: Exhaustion, now: number): void;
  /** The key is no longer exhausted (the store admitted with room to spare). */
  forget(key: string): void;
  readonly size: number;
  /** Bytes its entries occupy, as maxBytes counts them. */
  readonly bytes: number;
}

/**
 * A bounded LRU of exhaustions. A JS Map iterates in insertion order, so delete + set moves an
 * entry to the young end and the first key is the least recently used: O(1) everything.
 */
// The two misses, shared: a lookup on the hot path allocates nothing unless it hits.
const MISS = Object.freeze({ hit: false, exhausted: false } as const);
const MISS_EXHAUSTED = Object.freeze({ hit: false, exhausted: true } as const);

export function createDenialCache(options: DenialCacheOptions = {}): DenialCache {
  const maxEntries = options.maxEntries ?? DEFAULT_DENIAL_CACHE_SIZE;
  const maxBytes = options.maxBytes ?? DEFAULT_DENIAL_CACHE_BYTES;
  const entries = new Map<string, Exhaustion>();
  let bytes = 0;
  const entryBytes = (key: string) => stringBytes(key) + DENIAL_ENTRY_BYTES;

  function drop(key: string) {
    if (entries.delete(key)) bytes -= entryBytes(key);
  }

  // A hit moves the entry to the young end (delete + set: its bytes do not change).
  function touch(key: string, entry: Exhaustion) {
    entries.delete(key);
    entries.set(key, entry);
  }

  // Expired entries must not pile up: each write also drops up to two expired entries from the
  // old end. Together with the caps, a flood of one-off keys cannot grow the map.
  function sweep(now: number) {
    for (let i = 0; i < 2; i++) {
      const oldest = entries.entries().next();
      if (oldest.done || oldest.value[1].until > now) return;
      drop(oldest.value[0]);
    }
  }

  return {
    lookup(key, cost, now) {
      const entry = entries.get(key);
      if (!entry) return MISS;
      if (entry.until <= now || cost < entry.minCost) return MISS_EXHAUSTED;
      touch(key, entry);
      return { hit: true, entry };
    },

    remember(key, entry, now) {
      if (maxEntries <= 0) return;
      const existing = entries.get(key);
      // Both claims are true until their own instant; keep the one that denies more costs (the
      // smaller minCost), and of equals the one that lasts longer.
      const keepExisting =
        existing !== undefined &&
        existing.until > now &&
        (existing.minCost < entry.minCost ||
          (existing.minCost === entry.minCost && existing.until >= entry.until));
      if (existing === undefined) bytes += entryBytes(key);
      touch(key, keepExisting ? existing : entry);
      sweep(now);
      // The new entry is the youngest: if it alone is past maxBytes, it goes too.
      while (entries.size > maxEntries || bytes > maxBytes) {
        const oldest = entries.keys().next();
        if (oldest.done) break;
        drop(oldest.value);
      }
    },

    forget(key) {
      drop(key);
    },

    get size() {
      return entries.size;
    },

    get bytes() {
      return bytes;
    },
  };
}

/**
 * Remembers what a store answer proves about later requests of this key: a denial denies this
 * cost and more until capacity for it frees; an admission with too little left for another of
 * this cost denies every cost above what remains until the next unit frees; an admission with
 * room to spare clears the key.
 *
 * The store decided between sentAt and receivedAt (isolate clock). Converting its relative wait
 * from sentAt is never late, so the cache never denies what the store admits; from receivedAt
 * it is never early, which is what Retry-After must be.
 */
export function rememberAnswer(
  cache: DenialCache,
  key: string,
  cost: number,
  answer: PolicyAnswer,
  sentAt: number,
  receivedAt: number,
  /** Longest claim (ms from sentAt): a policy whose limit may change at run time. */
  maxClaimMs = Number.POSITIVE_INFINITY,
): void {
  // (In a request another policy denied, a policy that alone admitted reports its remaining
  // without this request's cost, so remaining ≥ cost: it is forgotten, never cached.)
  if (answer.allowed && answer.remaining >= cost) {
    cache.forget(key);
    return;
  }
  const wait = answer.allowed ? answer.reset - answer.now : answer.retryAfterMs;
  if (wait <= 0) return;
  cache.remember(
    key,
    {
      minCost: answer.allowed ? answer.remaining + 1 : cost,
      remaining: Math.max(0, answer.remaining),
      until: sentAt + Math.min(wait, maxClaimMs),
      retryAt: receivedAt + wait,
      ...(answer.limit !== undefined ? { limit: answer.limit } : {}),
    },
    receivedAt,
  );
}
