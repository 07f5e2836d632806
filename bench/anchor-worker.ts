// The anchor for `npm run bench`: @upstash/ratelimit behind the same POST /check contract as
// worker/worker.ts, built and served the same way (wrangler deploy --dry-run, then workerd alone).
// Bench-only; never deployed.
//
// Everything around the limiter is *our* HTTP layer (body validation and headers from
// edge-limiter/server, a token compare of the worker's kind), so the two workers differ only in
// the limiter: the ratios measure limiter against limiter.
//
// Configured as @upstash/ratelimit's README recommends for Workers: the Ratelimit instances (and
// so their ephemeralCache maps) live at module scope, created lazily on first use; the Redis
// client is the library's default (`@upstash/redis/cloudflare`, its retries and all). The
// library's fail-open `timeout` is set to the same value as our `timeoutMs`, so an outage costs
// both the same budget.

import { MultiRegionRatelimit, Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis/cloudflare";
import { parseCheckBody, rateLimitHeaders } from "edge-limiter/server";

interface AnchorEnv {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  LIMITER_TOKEN: string;
  /** "slidingWindow" or "fixedWindow". @default "slidingWindow" */
  ANCHOR_ALGORITHM?: string;
  /** Fail-open timeout of Ratelimit, ms. @default 500 (our default timeoutMs) */
  ANCHOR_TIMEOUT_MS?: string;
  /**
   * Comma-separated REST URLs of several databases, nearest first: the anchor is then
   * MultiRegionRatelimit over them (slidingWindow), as its README sets it up for many regions
   * (the regions benchmark, bench/lib/regions-bench.mjs). @default unset: one database
   */
  ANCHOR_REGION_URLS?: string;
}

type Algorithm = "slidingWindow" | "fixedWindow";

// One Ratelimit per (algorithm, limit, window), at module scope: the ephemeral cache only works
// while the isolate keeps the instance between requests.
const limiters = new Map<string, Ratelimit | MultiRegionRatelimit>();
let redis: Redis | undefined;

function limiterFor(env: AnchorEnv, algorithm: Algorithm, limit: number, windowMs: number) {
  const id = `${algorithm}:${limit}:${windowMs}`;
  let limiter = limiters.get(id);
  if (!limiter && env.ANCHOR_REGION_URLS) {
    limiter = new MultiRegionRatelimit({
      redis: env.ANCHOR_REGION_URLS.split(",").map(
        (url) => new Redis({ url, token: env.UPSTASH_REDIS_REST_TOKEN, enableTelemetry: false }),
      ),
      limiter: MultiRegionRatelimit.slidingWindow(limit, `${windowMs} ms`),
      prefix: `anchor-mr:${id}`,
      ephemeralCache: new Map(),
      timeout: Number(env.ANCHOR_TIMEOUT_MS ?? 500),
      analytics: false,
    });
    limiters.set(id, limiter);
  }
  if (!limiter) {
    redis ??= new Redis({
      url: env.UPSTASH_REDIS_REST_URL,
      token: env.UPSTASH_REDIS_REST_TOKEN,
      enableTelemetry: false,
    });
    const window = `${windowMs} ms` as const;
    limiter = new Ratelimit({
      redis,
      limiter:
        algorithm === "fixedWindow"
          ? Ratelimit.fixedWindow(limit, window)
          : Ratelimit.slidingWindow(limit, window),
      prefix: `anchor:${id}`,
      ephemeralCache: new Map(),
      timeout: Number(env.ANCHOR_TIMEOUT_MS ?? 500),
      analytics: false,
    });
    limiters.set(id, limiter);
  }
  return limiter;
}

/**
 * The token compared as our worker compares it, in kind and cost: every presented code unit read,
 * no early exit. Its own few lines, not the worker's module: the bench imports the library only
 * as a deployment would, and never the worker.
 */
function tokenMatches(header: string, token: string): boolean {
  const expected = `Bearer ${token}`;
  // An unset token matches nothing (not a bare "Bearer ").
  let diff = (header.length ^ expected.length) | (token === "" ? 1 : 0);
  for (let i = 0; i < header.length; i++) {
    diff |= header.charCodeAt(i) ^ expected.charCodeAt(i % expected.length);
  }
  return diff === 0;
}

function json(body: unknown, status: number, headers: Headers = new Headers()): Response {
  headers.set("Content-Type", "application/json");
  return new Response(JSON.stringify(body), { status, headers });
}

export default {
  async fetch(request: Request, env: AnchorEnv, ctx: ExecutionContext): Promise<Response> {
    const url = new URL(request.url);
    if (request.method !== "POST" || url.pathname !== "/check") {
      return json({ title: "Not Found" }, 404);
    }
    if (!tokenMatches(request.headers.get("Authorization") ?? "", env.LIMITER_TOKEN)) {
      return json({ title: "Unauthorized" }, 401);
    }
    let body: unknown;
    try {
      body = JSON.parse(await request.text());
    } catch {
      return json({ title: "Bad Request", field: "body" }, 400);
    }
    // Ad-hoc checks only (no rules are configured here): one policy per body.
    const parsed = parseCheckBody(body, new Map());
    if (!parsed.ok) return json({ title: "Bad Request", field: parsed.field }, 400);
    const [only] = parsed.value.requests;
    if (!only) return json({ title: "Bad Request", field: "body" }, 400);
    const { key, limit, windowMs, policy } = only;
    const cost = only.cost ?? 1;

    const algorithm: Algorithm =
      env.ANCHOR_ALGORITHM === "fixedWindow" ? "fixedWindow" : "slidingWindow";
    const result = await limiterFor(env, algorithm, limit, windowMs).limit(key, { rate: cost });
    // MultiRegionRatelimit merges the other databases after answering: keep that alive.
    ctx.waitUntil(result.pending);
    const now = Date.now();
    // reason: undefined (Redis answered), "cacheBlock" (ephemeral cache), "timeout" (fail-open).
    const source =
      result.reason === "cacheBlock"
        ? "cache"
        : result.reason === "timeout"
          ? "fail-open"
          : "redis";
    const reset = result.reset > 0 ? result.reset : now + windowMs;
    const decision = {
      allowed: result.success,
      limit,
      remaining: result.remaining,
      reset,
      resetAfterMs: Math.max(0, reset - now),
      retryAfterMs: result.success ? 0 : Math.max(0, reset - now),
      source,
      policy,
      windowMs,
    } as const;
    const { resetAfterMs: _r, windowMs: _w, ...answer } = decision;
    return json(answer, result.success ? 200 : 429, rateLimitHeaders([decision]));
  },
};
