// The minimal anchor for `npm run bench`'s workerd CPU section: @upstash/ratelimit slidingWindow behind the
// thinnest /check a team would write by hand: a token check, JSON in, JSON out. Bench-only; never
// deployed. Built and served like worker/worker.ts (wrangler deploy --dry-run, then workerd).
//
// Deliberately thin, so "our worker as deployed ÷ this" is what a user pays for choosing us over
// writing this: no framework, a plain string compare of the token (not constant-time), no body
// size cap, no strict validation beyond what it needs, no rate-limit headers. Configured as the
// library's README recommends for Workers (module-scope instances, ephemeralCache on), with its
// fail-open `timeout` at our `timeoutMs` (500 ms).

import { Ratelimit } from "@upstash/ratelimit";
import { Redis } from "@upstash/redis/cloudflare";

interface MinimalEnv {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  LIMITER_TOKEN: string;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const limiters = new Map<string, Ratelimit>();
let redis: Redis | undefined;

function windowMsOf(window: unknown): number | undefined {
  if (typeof window === "number") return window;
  const match = typeof window === "string" ? /^(\d+)(ms|s|m|h|d)$/.exec(window) : null;
  return match ? Number(match[1]) * (UNIT_MS[match[2] ?? ""] ?? Number.NaN) : undefined;
}

function json(body: unknown, status: number): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}

export default {
  async fetch(request: Request, env: MinimalEnv): Promise<Response> {
    if (request.method !== "POST" || new URL(request.url).pathname !== "/check") {
      return json({ error: "not found" }, 404);
    }
    if (request.headers.get("Authorization") !== `Bearer ${env.LIMITER_TOKEN}`) {
      return json({ error: "unauthorized" }, 401);
    }
    let body: { key?: unknown; limit?: unknown; window?: unknown; cost?: unknown };
    try {
      body = await request.json();
    } catch {
      return json({ error: "body is not JSON" }, 400);
    }
    const windowMs = windowMsOf(body.window);
    if (
      typeof body.key !== "string" ||
      typeof body.limit !== "number" ||
      windowMs === undefined ||
      !(windowMs > 0)
    ) {
      return json({ error: "key, limit and window are required" }, 400);
    }
    const id = `${body.limit}:${windowMs}`;
    let limiter = limiters.get(id);
    if (!limiter) {
      redis ??= new Redis({
        url: env.UPSTASH_REDIS_REST_URL,
        token: env.UPSTASH_REDIS_REST_TOKEN,
        enableTelemetry: false,
      });
      limiter = new Ratelimit({
        redis,
        limiter: Ratelimit.slidingWindow(body.limit, `${windowMs} ms`),
        prefix: `anchor-minimal:${id}`,
        ephemeralCache: new Map(),
        timeout: 500,
        analytics: false,
      });
      limiters.set(id, limiter);
    }
    const result = await limiter.limit(body.key, {
      rate: typeof body.cost === "number" ? body.cost : 1,
    });
    const now = Date.now();
    return json(
      {
        allowed: result.success,
        limit: result.limit,
        remaining: result.remaining,
        reset: result.reset,
        retryAfterMs: result.success ? 0 : Math.max(0, result.reset - now),
        source: result.reason === "cacheBlock" ? "cache" : "redis",
      },
      result.success ? 200 : 429,
    );
  },
};
