/**
 * The local fallback: an exact sliding-window log per key, in this isolate's memory, used only
 * while the store cannot answer. It knows nothing of other isolates (each enforces the limit on
 * its own), but an outage is not a free-for-all.
 *
 * It does know what the store last said about a key in this isolate (`note`): a key the store
 * reported with r units left is admitted at most r more units locally until everything counted
 * then has left the window. A slow store's late scripts have usually counted in Redis already;
 * starting every key from a full budget would hand the same capacity out twice.
 */
import { stringBytes } from "../owned-string";
import {
  DEFAULT_FALLBACK_MAX_BYTES,
  DEFAULT_FALLBACK_MAX_ENTRIES,
  DEFAULT_FALLBACK_MAX_KEYS,
} from "./defaults";
import { type Log, retryAfter } from "./fallback-log";

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
  /**
   * Most bytes each of its two tables may occupy: the logs (keys at 2 bytes a character,
   * LOG_BYTES a key, ENTRY_BYTES an admission) and the store's last reports (keys, REPORT_BYTES
   * each). The least recently used keys are dropped first.
   * @default 4 MiB
   */
  maxBytes?: number;
}

/** What a key's log costs besides its key and admissions: the Map slot, the Log, two arrays. */
const LOG_BYTES = 200;
/** An admission: a time and a cost in two arrays, with their growth slack. */
const ENTRY_BYTES = 24;
/** A store report besides its key: the Map slot and the Known. */
const REPORT_BYTES = 100;

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
   * What the store last reported for `key` in this isolate: `remaining` units left at `at`. Until
   * `at + windowMs` (when everything counted then has left the window) the fallback admits no
   * more than that, local admissions included. Bounded like the logs (maxKeys, LRU).
   */
  note(key: string, remaining: number, windowMs: number, at: number): void;
  /** Drop the store's last report of `key` (it was reset: the report describes the old log). */
  unnote(key: string): void;
  /**
   * What `limit` would decide now, consuming nothing (a multi-policy request checks every policy
   * before it consumes in any). Creates no key and does not touch the LRU order.
   */
  peek(key: string, limit: number, windowMs: number, cost: number, now: number): FallbackDecision;
  readonly keys: number;
  readonly entries: number;
  /** Bytes of the logs and of the reports, as maxBytes counts them. */
  readonly bytes: { logs: number; reports: number };
}

/** What the store last reported for a key: units left, until when that report binds. */
interface Known {
  remaining: number;
  until: number;
}

export function createFallbackLimiter(options: FallbackLimiterOptions = {}): FallbackLimiter {
  const maxEntries = options.maxEntries ?? DEFAULT_FALLBACK_MAX_ENTRIES;
  const maxKeys = options.maxKeys ?? DEFAULT_FALLBACK_MAX_KEYS;
  const maxBytes = options.maxBytes ?? DEFAULT_FALLBACK_MAX_BYTES;
  // Insertion-ordered Map as an LRU (delete + set moves a key to the young end).
  const logs = new Map<string, Log>();
  const known = new Map<string, Known>();
  let totalEntries = 0;
  // Bytes of the keys of each table (admissions are counted from totalEntries).
  let logKeyBytes = 0;
  let reportBytes = 0;
  const logsBytes = () => logKeyBytes + ENTRY_BYTES * totalEntries;

  function dropLog(key: string, log: Log) {
    totalEntries -= live(log);
    logKeyBytes -= stringBytes(key) + LOG_BYTES;
    logs.delete(key);
  }

  function dropReport(key: string) {
    if (known.delete(key)) reportBytes -= stringBytes(key) + REPORT_BYTES;
  }

  /** The store's last report of `key`, while it still binds (an expired one is dropped). */
  function knownOf(key: string, now: number): Known | undefined {
    const report = known.get(key);
    if (report && now >= report.until) {
      dropReport(key);
      return undefined;
    }
    return report;
  }

  /**
   * Decide `cost` against the local log and the store's last report, consuming nothing. A
   * report limits `used + cost` to what the store said was left (local admissions count against
   * it too: they never reached the store); it frees only when the report expires.
   */
  function decide(
    log: Log | undefined,
    key: string,
    limit: number,
    windowMs: number,
    cost: number,
    now: number,
  ): FallbackDecision & { fits: boolean } {
    const used = log?.used ?? 0;
    const oldest = log?.times[log.head];
    const resetAfterMs = oldest === undefined ? windowMs : oldest + windowMs - now;
    const report = knownOf(key, now);
    const localFits = used + cost <= limit;
    const reportFits = report === undefined || used + cost <= report.remaining;
    const cap = report === undefined ? limit : Math.min(limit, report.remaining);
    if (localFits && reportFits) {
      return {
        fits: true,
        allowed: true,
        remaining: cap - used - cost,
        resetAfterMs,
        retryAfterMs: 0,
      };
    }
    const localWait = localFits ? 0 : log ? retryAfter(log, limit, windowMs, cost, now) : windowMs;
    const reportWait = reportFits || !report ? 0 : Math.max(1, report.until - now);
    return {
      fits: false,
      allowed: false,
      remaining: Math.max(0, cap - used),
      resetAfterMs,
      retryAfterMs: Math.max(localWait, reportWait),
    };
  }

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

  /** Makes room for one more admission of `key`: least recently used logs leave first. */
  function evictFor(key: string) {
    for (const [oldKey, oldLog] of logs) {
      if (
        logs.size <= maxKeys &&
        totalEntries < maxEntries &&
        logsBytes() + ENTRY_BYTES <= maxBytes
      ) {
        return;
      }
      if (oldKey === key) continue;
      dropLog(oldKey, oldLog);
    }
  }

  // Logs and reports that hold nothing any more must not pile up behind live ones: each new
  // key also drops up to two such entries from the old end of its table (amortised, no timer).
  function sweepLogs(now: number) {
    for (let i = 0; i < 2; i++) {
      const oldest = logs.entries().next();
      if (oldest.done || oldest.value[1].emptyAt > now) return;
      dropLog(oldest.value[0], oldest.value[1]);
    }
  }

  function sweepReports(now: number) {
    for (let i = 0; i < 2; i++) {
      const oldest = known.entries().next();
      if (oldest.done || oldest.value[1].until > now) return;
      dropReport(oldest.value[0]);
    }
  }

  return {
    limit(key, limit, windowMs, cost, now) {
      let log = logs.get(key);
      if (log) logs.delete(key);
      else {
        sweepLogs(now);
        log = { times: [], costs: [], head: 0, used: 0, emptyAt: now };
        logKeyBytes += stringBytes(key) + LOG_BYTES;
      }
      logs.set(key, log);
      trim(log, now, windowMs);

      const { fits, ...decision } = decide(log, key, limit, windowMs, cost, now);
      if (fits) {
        evictFor(key);
        // Only if this key alone fills the budget: refuse rather than grow without bound.
        if (totalEntries < maxEntries && logsBytes() + ENTRY_BYTES <= maxBytes) {
          log.times.push(now);
          log.costs.push(cost);
          log.used += cost;
          log.emptyAt = now + windowMs;
          totalEntries++;
          return decision;
        }
        return {
          allowed: false,
          remaining: decision.remaining + cost,
          resetAfterMs: decision.resetAfterMs,
          retryAfterMs: retryAfter(log, limit, windowMs, cost, now),
        };
      }
      return decision;
    },

    note(key, remaining, windowMs, at) {
      dropReport(key);
      sweepReports(at);
      const size = stringBytes(key) + REPORT_BYTES;
      // A report alone past the budget is not kept (it only ever narrows what is admitted).
      if (size > maxBytes) return;
      while (known.size >= maxKeys || reportBytes + size > maxBytes) {
        const oldest = known.keys().next();
        if (oldest.done) break;
        dropReport(oldest.value);
      }
      known.set(key, { remaining: Math.max(0, remaining), until: at + windowMs });
      reportBytes += size;
    },

    unnote(key) {
      dropReport(key);
    },

    peek(key, limit, windowMs, cost, now) {
      const log = logs.get(key);
      // Trimming only drops admissions that left the window: what `limit` would do first anyway.
      if (log) trim(log, now, windowMs);
      const { fits: _, ...decision } = decide(log, key, limit, windowMs, cost, now);
      return decision;
    },

    get keys() {
      return logs.size;
    },

    get entries() {
      return totalEntries;
    },

    get bytes() {
      return { logs: logsBytes(), reports: reportBytes };
    },
  };
}
