/**
 * Leases through the surfaces (README "Leases"): an ad-hoc /check with `"lease": true` and a
 * middleware rule with `lease: true`, each with the request's `waitUntil` (the execution
 * context's), against the real bridge and Redis. And what they refuse.
 */
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { createLimiter, type RateLimitVariables, rateLimit } from "../../../src/index";
import app from "../../../src/worker";
import { scopedPrefix, testStore } from "../../support/worker/redis";
import { baseEnv } from "../../support/worker/worker-harness";

const prefix = scopedPrefix("lease-http");
const env = {
  ...baseEnv,
  LIMITER_CONFIG: JSON.stringify({
    rules: [{ name: "named", limit: 100, window: "1m" }],
    prefix,
    timeoutMs: 5_000,
  }),
};

/** One POST /check with its own execution context; the background work it started, awaited. */
async function check(body: object): Promise<{ status: number; json: Record<string, unknown> }> {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request("https://limited.test/check", {
      method: "POST",
      headers: {
        Authorization: `Bearer ${baseEnv.LIMITER_TOKEN}`,
        "Content-Type": "application/json",
      },
      body: JSON.stringify(body),
    }),
    env,
    ctx,
  );
  const json = (await res.json()) as Record<string, unknown>;
  await waitOnExecutionContext(ctx);
  return { status: res.status, json };
}

describe("leases through /check and the middleware", () => {
  it('/check with "lease": true: a hot key is answered from the lease', async () => {
    // A 2 s window: 100 ms leases (the lease ends by a real timer, which waitOnExecutionContext waits for).
    const body = { key: `k-${crypto.randomUUID()}`, limit: 1_000, window: "2s", lease: true };
    const first = await Promise.all(Array.from({ length: 6 }, () => check(body)));
    expect(first.every((answer) => answer.status === 200)).toBe(true);
    const later = await check(body);
    expect(later).toMatchObject({ status: 200, json: { allowed: true, source: "lease" } });
    // Without the field, the same key is decided by the store.
    const { lease: _, ...plain } = body;
    expect((await check(plain)).json.source).toBe("redis");
  });

  it('/check refuses "lease" with an O(1) algorithm and beside a named rule, naming the field', async () => {
    const o1 = await check({
      key: "k",
      limit: 10,
      window: "1m",
      algorithm: "token-bucket",
      lease: true,
    });
    expect(o1.status).toBe(400);
    expect(o1.json).toMatchObject({ field: "lease" });
    expect(String(o1.json.detail)).toContain("sliding logs only");
    const named = await check({ key: "k", rule: "named", lease: true });
    expect(named.status).toBe(400);
    expect(named.json).toMatchObject({ field: "lease" });
    const wrong = await check({ key: "k", limit: 10, window: "1m", lease: 1 });
    expect(wrong.json).toMatchObject({ field: "lease" });
  });

  it("a middleware rule with lease: true is answered from the lease, and the app sees it", async () => {
    const limiter = createLimiter({ store: testStore(5_000), prefix, timeoutMs: 5_000 });
    const hono = new Hono<{ Variables: RateLimitVariables }>();
    hono.use(
      rateLimit({
        limiter,
        rules: { name: "mw-lease", limit: 1_000, window: "2s", lease: true },
        key: () => "one",
      }),
    );
    hono.get("/", (c) => c.json(c.get("rateLimit").decisions[0]?.source));
    const call = async () => {
      const ctx = createExecutionContext();
      const res = await hono.fetch(new Request("https://app.test/"), {}, ctx);
      const source = await res.json();
      await waitOnExecutionContext(ctx);
      return { status: res.status, source, limit: res.headers.get("RateLimit") };
    };
    await Promise.all(Array.from({ length: 6 }, call));
    const later = await call();
    expect(later).toMatchObject({ status: 200, source: "lease" });
    expect(later.limit).toMatch(/^"mw-lease";r=\d+;t=\d+$/);
    await limiter.endLeases();
  });

  it("a middleware rule with lease: true and an O(1) algorithm is a 503 naming the field", async () => {
    const limiter = createLimiter({ store: testStore(5_000), prefix });
    const hono = new Hono();
    hono.use(
      rateLimit({
        limiter,
        rules: { name: "bad", limit: 10, window: "1m", algorithm: "fixed-window", lease: true },
      }),
    );
    hono.get("/", (c) => c.text("should not run"));
    const res = await hono.request("/");
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ field: "rules[0].lease" });
  });
});
