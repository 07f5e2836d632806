// The floor for `npm run bench`'s workerd CPU section: the least a /check worker can
// cost when it makes the store calls a limiter with a denial cache makes, and does nothing else.
// Bench-only; never deployed. Built and served like worker/worker.ts.
//
// Per request: a plain token compare, the body read and parsed, then either an answer from a
// per-isolate map of keys the store found full (no store call: what both limiters' denial
// caches do), or one store request, bounded by one timer that aborts it (what a limiter that
// fails open at a deadline must do), a fixed-window count in one EVAL, and a JSON answer with one
// header. No validation, no rate-limit headers, no framework, no client library: what is left is
// workerd's own work for the request in, the store subrequest and the answer, the part no
// limiter can cut. "ours ÷ anchor" cannot go below "floor ÷ anchor" without fewer store calls.

interface FloorEnv {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  LIMITER_TOKEN: string;
}

const COUNT =
  "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n";
const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000 };
const full = new Map<string, number>();

function json(body: unknown, status: number): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}

export default {
  async fetch(request: Request, env: FloorEnv): Promise<Response> {
    if (request.headers.get("Authorization") !== `Bearer ${env.LIMITER_TOKEN}`) {
      return json({ error: "unauthorized" }, 401);
    }
    const body = JSON.parse(await request.text()) as { key: string; limit: number; window: string };
    const now = Date.now();
    const until = full.get(body.key);
    if (until !== undefined && until > now) return json({ allowed: false, source: "cache" }, 429);
    const windowMs = Number(body.window.slice(0, -1)) * (UNIT_MS[body.window.slice(-1)] ?? 1);
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 500);
    try {
      const res = await fetch(env.UPSTASH_REDIS_REST_URL, {
        method: "POST",
        headers: { Authorization: `Bearer ${env.UPSTASH_REDIS_REST_TOKEN}` },
        body: JSON.stringify(["EVAL", COUNT, 1, `floor:${body.key}`, windowMs]),
        signal: controller.signal,
      });
      const count = (JSON.parse(await res.text()) as { result: number }).result;
      const allowed = count <= body.limit;
      if (!allowed) {
        if (full.size >= 10_000) full.clear();
        full.set(body.key, now + windowMs);
      }
      return json({ allowed, remaining: Math.max(0, body.limit - count) }, allowed ? 200 : 429);
    } catch {
      return json({ allowed: true, source: "fail-open" }, 200);
    } finally {
      clearTimeout(timer);
    }
  },
};
