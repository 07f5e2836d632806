/**
 * src/analytics/: what the limiter decided, counted per rule and per minute in each isolate and
 * flushed to Redis off the request path (docs/analytics.md). It owns the
 * per-isolate aggregate (aggregate.ts, top-keys.ts), the Redis layout of the counts
 * (redis-layout.ts), the recorder that the limiter's `onDecision` hook feeds and that flushes
 * (create-analytics.ts), the Workers Analytics Engine sink (analytics-engine-sink.ts) and the
 * reading of the last hour back (read-stats.ts). It may import the limiter's public types
 * (limiter/types.ts) and the breaker's event type; nothing of http/, rules/ or config/.
 *
 * This file: the public types.
 */
import type { Redis } from "@upstash/redis";
import type { BreakerEvent } from "../limiter/circuit-breaker";
import type { DecisionSource, LimitRequest, MultiDecision, SettledUsage } from "../limiter/types";

/** The part of an @upstash/redis client the analytics use: one pipelined call per flush. */
export type AnalyticsStore = Pick<Redis, "pipeline">;

/** A Workers Analytics Engine dataset binding (`analytics_engine_datasets` in wrangler.toml). */
export interface AnalyticsEngineDatasetLike {
  writeDataPoint(event?: {
    indexes?: (string | null)[];
    doubles?: number[];
    blobs?: (string | null)[];
  }): void;
}

export interface AnalyticsOptions {
  /**
   * Where the per-minute counts are flushed (the limiter's store client is the usual one);
   * omit it to send data points to `analyticsEngine` only.
   * @default none
   */
  store?: AnalyticsStore;
  /**
   * Prefix of the analytics keys (`<prefix>:analytics:…`): give it the limiter's.
   * @default "edge-limiter"
   */
  prefix?: string;
  /**
   * Shortest time between two flushes of this isolate's counts (one pipelined call each).
   * @default 5000
   */
  flushIntervalMs?: number;
  /**
   * How long the per-minute counts live in Redis (minutes).
   * @default 1440 (a day)
   */
  retentionMinutes?: number;
  /**
   * Denied client keys kept per rule and minute (the most denied; 0 keeps none), and as many
   * top spenders of a usage rule (the most units charged). They live an hour and two minutes:
   * the dashboard's hour.
   * @default 10
   */
  topKeys?: number;
  /**
   * The raw value a top denied key was hashed from, when known (the worker gives its rule set's
   * `keyLabel` when `analytics.keyLabels` is on). Given, each flush stores it beside the key for
   * an hour and two minutes, and the stats answer it as `label`. Raw values are then in Redis:
   * leave it off where keys are secrets.
   * @default none: no label is stored
   */
  keyLabel?: (key: string) => string | undefined;
  /**
   * The region names whose counts GET /check/stats reads back (the configured `regions`).
   * @default []
   */
  regions?: readonly string[];
  /**
   * The rules counted and listed by name: the configured ones. Every other policy (in the
   * worker, the ad-hoc /check windows `check.<window>ms`, which callers pick) is counted under
   * one "(ad-hoc)" rule, so the counts and GET /check/stats stay the size of the config.
   * @default every policy by name, at most 64 a minute (the rest under "(other)")
   */
  rules?: Iterable<string>;
  /**
   * Rules whose denials are shadow denials (decided, never enforced): counted apart.
   * @default []
   */
  shadowPolicies?: Iterable<string>;
  /**
   * Usage rules (docs/usage.md): their reservations are counted as units charged, and the
   * stats answer their units and top spenders even in a span without any. A policy decided in
   * the weighted log (`sliding-log-weighted`) is one whether listed or not; a usage rule on a
   * fixed window or a calendar period must be listed (the worker lists every rule with `usage`).
   * @default [] (the weighted log's policies only)
   */
  usagePolicies?: Iterable<string>;
  /**
   * Keeps a flush alive after the response (`ctx.waitUntil`, or `waitUntil` from
   * "cloudflare:workers"). Without it the flush runs unattended (fine in Node).
   * @default none
   */
  waitUntil?: (promise: Promise<unknown>) => void;
  /** A Workers Analytics Engine dataset: one data point per decision. @default none */
  analyticsEngine?: AnalyticsEngineDatasetLike;
  /** The isolate's clock (ms); injectable for tests. @default Date.now */
  now?: () => number;
  /** Called when a flush fails (its counts are kept for the next one). @default none */
  onFlushError?: (error: unknown) => void;
}

/** What one rule did in one minute. */
export interface RuleMinuteCounts {
  /** Decisions that admitted (the request consumed this rule's cost). */
  allowed: number;
  /** Decisions this (enforced) rule denied. */
  denied: number;
  /** Of `denied`, those answered by the denial cache (no store call). */
  deniedFromCache: number;
  /** Denials of a shadow rule (never enforced). */
  shadowDenied: number;
  /** Every decision of this rule, by where it came from (the five every limiter has, at 0 if none). */
  sources: Partial<Record<DecisionSource, number>>;
  /**
   * Decisions of requests in a region (docs/regions.md), by region name, whoever decided them
   * (the region, an isolate lease, or home on a miss). Absent without regions.
   */
  regions?: Record<string, number>;
  /**
   * A usage rule's units charged (docs/usage.md): each admitted request's reservation, then what
   * its settle charged or gave back, both in the minute the request was admitted; once settled,
   * what the requests used. Present for usage rules only.
   */
  units?: number;
}

export interface Analytics {
  /**
   * The limiter's `onDecision` hook: counts one decided call. Synchronous and cheap; flushes
   * through `waitUntil` when the last flush is `flushIntervalMs` old. Never throws.
   */
  record(requests: readonly LimitRequest[], decided: MultiDecision): void;
  /**
   * The limiter's `onSettle` hook: counts what a settle charged or gave back, per usage rule
   * and client key. As cheap as `record`; never throws.
   */
  recordSettle(settled: SettledUsage): void;
  /** Flushes what this isolate holds now (the stats route calls it before reading). */
  flush(): Promise<void>;
  /** The limiter's `onBreakerChange`: remembered for the stats. */
  noteBreaker(event: BreakerEvent): void;
  /** This isolate's breaker as last reported, and its flush counters. */
  isolate(): IsolateStats;
  /**
   * Flushes this isolate's counts, then reads the last `minutes` minutes of `rules` back from
   * Redis (listed even without counts), and of "(ad-hoc)" and "(other)" when they have counts;
   * nothing else, whatever else is stored under the prefix. Undefined without a `store`. Rejects
   * when the store fails.
   */
  stats(minutes: number, rules: readonly string[]): Promise<StatsSpan | undefined>;
}

export interface IsolateStats {
  breaker: { state: BreakerEvent["to"]; since: number | null; failures: number; error?: string };
  /** Flushes made (one pipelined store call each) and failed, and decisions recorded. */
  flushes: number;
  flushFailures: number;
  decisions: number;
  /** Rule-minutes dropped because the aggregate was full (store down for long). */
  dropped: number;
}

/** One rule's counts over a span of minutes, as `/check/stats` answers them (read-stats.ts). */
export interface StatsRule {
  rule: string;
  shadow: boolean;
  /** The whole span. */
  totals: RuleMinuteCounts;
  /** One entry per minute, oldest first; `minute` is its start (Unix ms). */
  minutes: ({ minute: number } & Omit<RuleMinuteCounts, "sources">)[];
  /** The most denied client keys over the span (its last hour at most), most first. */
  topDenied: { key: string; count: number; label?: string }[];
  /**
   * Usage rules only: the client keys charged the most units over the span (its last hour at
   * most), most first, at most `topKeys`; a key whose units came to 0 is left out.
   */
  topSpenders?: { key: string; units: number; label?: string }[];
}

export interface StatsSpan {
  /** Start of the oldest minute and end of the newest (Unix ms). */
  from: number;
  to: number;
  rules: StatsRule[];
}
