/**
 * GET /check/stats: what the analytics counted, per rule and minute, as JSON (docs/analytics.md); the dashboard's data. This isolate's pending counts are flushed first, so
 * what it decided is in the answer to the request.
 */

import { describeStoreError, problemResponse } from "edge-limiter/server";
import type { Context } from "hono";
import { authorizedReader } from "./dashboard-auth";
import type { Env } from "./env";

const MAX_STATS_MINUTES = 1_440;
const DEFAULT_STATS_MINUTES = 60;

export async function statsHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const authorized = await authorizedReader(c);
  if (!authorized.ok) return authorized.response;
  const { runtime } = authorized;
  const asked = c.req.query("minutes");
  const minutes = asked === undefined ? DEFAULT_STATS_MINUTES : Number(asked);
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > MAX_STATS_MINUTES || asked === "") {
    return problemResponse(400, {
      title: "Bad Request",
      detail: `minutes must be an integer from 1 to ${MAX_STATS_MINUTES}`,
      field: "minutes",
    });
  }
  const noStore = { "Cache-Control": "no-store" };
  // Each shard's breaker and decisions in this isolate, analytics or not (docs/shards.md).
  const shards = runtime.shardTally?.report(runtime.limiter);
  // Concurrency rules (docs/concurrency.md): their slots in flight now, over every key.
  const concurrency = runtime.config.rules
    .filter((rule) => rule.algorithm === "concurrency")
    .map((rule) => rule.name);
  let inFlight: Awaited<ReturnType<typeof runtime.limiter.inFlight>> = [];
  if (concurrency.length > 0) {
    try {
      inFlight = await runtime.limiter.inFlight(concurrency);
    } catch (error) {
      return statsStoreUnavailable(error);
    }
  }
  const slots = inFlight.length > 0 ? { inFlight } : {};
  const settings = runtime.config.analytics;
  const { analytics } = runtime;
  if (!analytics) {
    return c.json(
      {
        enabled: false,
        detail: 'analytics are off: set "analytics": {"enabled": true} in LIMITER_CONFIG',
        rules: [],
        ...(shards ? { shards } : {}),
        ...slots,
      },
      200,
      noStore,
    );
  }
  let span: Awaited<ReturnType<typeof analytics.stats>>;
  try {
    span = await analytics.stats(
      minutes,
      runtime.config.rules.map((rule) => rule.name),
    );
  } catch (error) {
    return statsStoreUnavailable(error);
  }
  return c.json(
    {
      enabled: true,
      generatedAt: Date.now(),
      minutes,
      sinks: settings.sinks,
      flushIntervalMs: settings.flushIntervalMs,
      isolate: analytics.isolate(),
      ...(shards ? { shards } : {}),
      ...slots,
      ...(span ?? {
        rules: [],
        detail: 'analytics.sinks has no "redis": the counts are in Analytics Engine only',
      }),
    },
    200,
    noStore,
  );
}

/** 503 naming the store's cause (a wrong token is said as such), logged with the error. */
function statsStoreUnavailable(error: unknown): Response {
  const { cause, detail } = describeStoreError(error);
  console.error(JSON.stringify({ event: "stats-store-error", cause, error: String(error) }));
  return problemResponse(503, { title: "Store unavailable", detail, cause });
}
