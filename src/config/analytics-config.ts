/**
 * LIMITER_CONFIG's `analytics` (docs/analytics.md): off unless
 * `"enabled": true`. Reads its defaults from analytics/defaults.ts (a leaf).
 */
import * as v from "valibot";
import {
  DEFAULT_FLUSH_INTERVAL_MS,
  DEFAULT_RETENTION_MINUTES,
  DEFAULT_TOP_KEYS,
} from "../analytics/analytics-defaults";
import { integerIn, plainObject } from "./schema-parts";

const ANALYTICS_SINKS = ["redis", "analytics-engine"] as const;

export const analyticsSchema = plainObject(
  {
    /** Count decisions per rule and minute (GET /check/stats, /check/dashboard). @default false */
    enabled: v.optional(v.boolean("must be true or false"), false),
    /** Shortest time between two flushes of an isolate's counts to Redis (ms). @default 5000 */
    flushIntervalMs: v.optional(integerIn(1_000, 60_000), DEFAULT_FLUSH_INTERVAL_MS),
    /** How long the per-minute counts live in Redis (minutes, 1 hour to 7 days). @default 1440 */
    retentionMinutes: v.optional(integerIn(60, 10_080), DEFAULT_RETENTION_MINUTES),
    /** Most denied client keys kept per rule and minute (0 keeps none). @default 10 */
    topKeys: v.optional(integerIn(0, 50), DEFAULT_TOP_KEYS),
    /**
     * Store the raw value beside a header rule's top denied keys (their SHA-256), for the
     * dashboard to name who is limited. Off: an API key is a secret, kept out of Redis.
     * @default false
     */
    keyLabels: v.optional(v.boolean("must be true or false"), false),
    /**
     * Where counts go: `"redis"` (what /check/stats reads) and/or `"analytics-engine"` (one data
     * point per decision to the `LIMITER_ANALYTICS` Workers Analytics Engine binding).
     * @default ["redis"]
     */
    sinks: v.optional(
      v.pipe(
        v.array(
          v.picklist(ANALYTICS_SINKS, 'must be "redis" or "analytics-engine"'),
          'must be an array of "redis" and/or "analytics-engine"',
        ),
        v.minLength(1, 'must name at least one of "redis" and "analytics-engine"'),
      ),
      ["redis"],
    ),
  },
  "must be an object with enabled, flushIntervalMs, retentionMinutes, topKeys, keyLabels and/or sinks",
);
