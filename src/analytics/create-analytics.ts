/**
 * The recorder: the limiter's `onDecision` hook counts each decided call into this isolate's
 * aggregate (and, when given, one Analytics Engine data point per rule), and at most every
 * `flushIntervalMs` hands one pipelined flush to `waitUntil`, off the request path. A failed
 * flush keeps its counts for the next one (bounded: aggregate.ts). Usage rules' units: each
 * admitted request's reservation here, and what its settle charged through `onSettle`
 * (`recordSettle`), both counted in the minute the request was admitted (its receipt's `at`).
 */
import type { BreakerEvent } from "../limiter/circuit-breaker";
import { DEFAULT_COST, DEFAULT_PREFIX } from "../limiter/defaults";
import type { LimitRequest, MultiDecision, SettledUsage } from "../limiter/types";
import { Aggregate, type Outcome } from "./aggregate";
import {
  DEFAULT_FLUSH_INTERVAL_MS,
  DEFAULT_RETENTION_MINUTES,
  DEFAULT_TOP_KEYS,
} from "./analytics-defaults";
import { writeDecisionPoint } from "./analytics-engine-sink";
import { readStats } from "./read-stats";
import { flushPending, MINUTE_MS } from "./redis-layout";
import type { Analytics, AnalyticsOptions, IsolateStats } from "./types";

/** Keys tracked per rule and minute, per kept one: the space-saving counter's headroom. */
const TRACKED_PER_TOP_KEY = 4;

/**
 * Per-rule counts of a limiter's decisions: give its `record` to the limiter as `onDecision`.
 * Counts stay in the isolate and are flushed to the store (and Analytics Engine, when given)
 * through `waitUntil`, off the request path; `stats` reads them back (docs/analytics.md).
 *
 * @example
 * ```ts
 * const analytics = createAnalytics({ store, prefix: "my-app", waitUntil, rules: ["api"] });
 * const limiter = createLimiter({
 *   store,
 *   prefix: "my-app",
 *   onDecision: analytics.record,
 *   onSettle: analytics.recordSettle,
 * });
 * const lastHour = await analytics.stats(60, ["api"]);
 * ```
 */
export function createAnalytics(options: AnalyticsOptions = {}): Analytics {
  const now = options.now ?? Date.now;
  const interval = options.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
  const topKeys = options.topKeys ?? DEFAULT_TOP_KEYS;
  const layout = {
    prefix: options.prefix ?? DEFAULT_PREFIX,
    retentionMinutes: options.retentionMinutes ?? DEFAULT_RETENTION_MINUTES,
    topKeys,
    keyLabel: options.keyLabel,
  };
  const { store, analyticsEngine, waitUntil, onFlushError } = options;
  const shadow = new Set(options.shadowPolicies ?? []);
  const listed = options.rules ? new Set(options.rules) : undefined;
  const usage = new Set(options.usagePolicies ?? []);
  const aggregate = new Aggregate(topKeys * TRACKED_PER_TOP_KEY, listed);
  const counters: IsolateStats = {
    breaker: { state: "closed", since: null, failures: 0 },
    flushes: 0,
    flushFailures: 0,
    decisions: 0,
    dropped: 0,
  };
  let lastFlushAt: number | undefined;
  let inFlight: Promise<void> | undefined;

  function flush(): Promise<void> {
    // One flush at a time: a second waits for the first, then sends what arrived meanwhile.
    if (inFlight) return inFlight.then(flush);
    if (!store || aggregate.size === 0) return Promise.resolve();
    lastFlushAt = now();
    const taken = aggregate.take();
    counters.flushes++;
    inFlight = flushPending(store, taken, layout).then(
      () => {
        inFlight = undefined;
      },
      (error: unknown) => {
        inFlight = undefined;
        counters.flushFailures++;
        aggregate.restore(taken);
        onFlushError?.(error);
      },
    );
    return inFlight;
  }

  /** A flush through `waitUntil` when the last one is `flushIntervalMs` old. */
  function flushIfDue(at: number): void {
    lastFlushAt ??= at;
    if (store && !inFlight && at - lastFlushAt >= interval) {
      const flushing = flush();
      try {
        waitUntil?.(flushing);
      } catch {
        // No request to attach to (a call outside a request): the flush runs unattended.
      }
    }
  }

  return {
    record(requests: readonly LimitRequest[], decided: MultiDecision) {
      try {
        const at = now();
        const minute = Math.floor(at / MINUTE_MS);
        const { decisions } = decided;
        for (let i = 0; i < decisions.length; i++) {
          const decision = decisions[i];
          const request = requests[i];
          if (!decision || !request) continue;
          const outcome: Outcome = !decision.allowed
            ? shadow.has(decision.policy)
              ? "shadow-denied"
              : "denied"
            : decided.allowed
              ? "allowed"
              : "not-counted";
          aggregate.add(
            minute,
            decision.policy,
            outcome,
            decision.source,
            request.key,
            decided.region,
          );
          // A usage rule's reservation, when the store took it now (a receipt: not a replay,
          // not a fail-open admission), in the minute of the receipt its settle will name.
          const { receipt } = decided;
          if (
            receipt &&
            decided.allowed &&
            (decision.algorithm === "sliding-log-weighted" || usage.has(decision.policy))
          ) {
            aggregate.addUnits(
              minuteOf(receipt.at, minute),
              decision.policy,
              request.key,
              request.cost ?? DEFAULT_COST,
            );
          }
          if (analyticsEngine) {
            writeDecisionPoint(
              analyticsEngine,
              decision.policy,
              decision.source,
              outcome,
              request.key,
              request.cost ?? DEFAULT_COST,
            );
          }
        }
        counters.decisions += decisions.length;
        flushIfDue(at);
      } catch (error) {
        // Counting must never break a decision.
        onFlushError?.(error);
      }
    },
    recordSettle(settled: SettledUsage) {
      try {
        const at = now();
        const minute = minuteOf(settled.at, Math.floor(at / MINUTE_MS));
        for (const { policy, key, units } of settled.charges) {
          aggregate.addUnits(minute, policy, key, units);
        }
        flushIfDue(at);
      } catch (error) {
        // Counting must never break a settle.
        onFlushError?.(error);
      }
    },
    flush,
    noteBreaker(event: BreakerEvent) {
      counters.breaker = {
        state: event.to,
        since: now(),
        failures: event.failures,
        ...(event.error !== undefined ? { error: event.error } : {}),
      };
    },
    isolate() {
      return { ...counters, dropped: aggregate.dropped };
    },
    async stats(minutes, rules) {
      if (!store) return undefined;
      await flush();
      return readStats(store, {
        prefix: layout.prefix,
        minutes,
        now: now(),
        rules,
        shadowPolicies: shadow,
        usagePolicies: usage,
        topKeys,
        labels: options.keyLabel !== undefined,
        regions: options.regions ?? [],
      });
    },
  };
}

/** The minute of a store time (a receipt's `at`), or `fallback` for one that is not a time. */
function minuteOf(at: number, fallback: number): number {
  return Number.isFinite(at) && at > 0 ? Math.floor(at / MINUTE_MS) : fallback;
}
