import { SELF } from "cloudflare:test";
import { afterAll, describe, expect, it } from "vitest";
import { deleteKeys, testRedis } from "../../support/worker/redis";

const TOKEN = "test-limiter-token"; // bound in vitest.config.ts
const run = crypto.randomUUID();
const redis = testRedis();

afterAll(async () => {
  // The worker uses wrangler.toml's config (prefix "edge-limiter"); our client keys hold `run`.
  await deleteKeys(redis, `edge-limiter:*${run}*`);
});

function check(body: unknown, init: { token?: string | null; contentType?: string } = {}) {
  const headers: Record<string, string> = {
    "Content-Type": init.contentType ?? "application/json",
  };
  if (init.token !== null) headers.Authorization = `Bearer ${init.token ?? TOKEN}`;
  return SELF.fetch("http://limiter/check", {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

describe("POST /check", () => {
  it("answers 200 while allowed and 429 when denied, with the contract's fields and headers", async () => {
    const key = `contract-${run}`;
    const first = await check({ key, limit: 2, window: "1m" });
    expect(first.status).toBe(200);
    const body = await first.json<Record<string, unknown>>();
    expect(body).toMatchObject({
      allowed: true,
      limit: 2,
      remaining: 1,
      retryAfterMs: 0,
      source: "redis",
    });
    expect(body.reset).toBeGreaterThan(Date.now() - 5_000);
    expect(first.headers.get("RateLimit-Policy")).toBe('"check.60000ms.2";q=2;w=60');
    expect(first.headers.get("RateLimit")).toMatch(/^"check\.60000ms\.2";r=1;t=(59|60)$/);

    expect((await check({ key, limit: 2, window: 60_000 })).status).toBe(200);
    const denied = await check({ key, limit: 2, window: "60s" });
    expect(denied.status).toBe(429);
    const deniedBody = await denied.json<{
      allowed: boolean;
      remaining: number;
      retryAfterMs: number;
      reset: number;
    }>();
    // The decision JSON, not problem+json: /check answers what it decided, allowed or not.
    expect(denied.headers.get("Content-Type")).toMatch(/^application\/json/);
    expect(deniedBody).toMatchObject({ allowed: false, remaining: 0, deniedBy: "check.60000ms.2" });
    expect(deniedBody.retryAfterMs).toBeGreaterThan(59_000);
    expect(deniedBody.retryAfterMs).toBeLessThanOrEqual(60_000);
    // Retry-After rounds up: never earlier than capacity frees.
    expect(Number(denied.headers.get("Retry-After"))).toBe(
      Math.ceil(deniedBody.retryAfterMs / 1000),
    );
  });

  it("uses one log per key and window, whatever the spelling of the window", async () => {
    const key = `spelling-${run}`;
    expect((await check({ key, limit: 1, window: "1m" })).status).toBe(200);
    expect((await check({ key, limit: 1, window: "60000ms" })).status).toBe(429);
    expect((await check({ key, limit: 1, window: "1h" })).status).toBe(200);
  });

  it("refuses a missing, wrong or malformed token with 401, counting nothing", async () => {
    const key = `auth-${run}`;
    for (const token of [null, "wrong", "", `${TOKEN}x`]) {
      const res = await check({ key, limit: 1, window: "1m" }, { token });
      expect(res.status, String(token)).toBe(401);
      expect(res.headers.get("Content-Type")).toContain("application/problem+json");
    }
    expect((await check({ key, limit: 1, window: "1m" })).status).toBe(200);
  });

  it("takes the Bearer scheme in any letter case (RFC 9110 auth schemes are case-insensitive)", async () => {
    const key = `scheme-${run}`;
    for (const authorization of [`bearer ${TOKEN}`, `BEARER ${TOKEN}`, `bEaReR ${TOKEN}`]) {
      const res = await SELF.fetch("http://limiter/check", {
        method: "POST",
        headers: { Authorization: authorization, "Content-Type": "application/json" },
        body: JSON.stringify({ key, limit: 10, window: "1m" }),
      });
      expect(res.status, authorization).toBe(200);
      await res.arrayBuffer();
    }
    for (const authorization of [`Basic ${TOKEN}`, `Bearer${TOKEN}`, TOKEN]) {
      const res = await SELF.fetch("http://limiter/check", {
        method: "POST",
        headers: { Authorization: authorization, "Content-Type": "application/json" },
        body: JSON.stringify({ key, limit: 10, window: "1m" }),
      });
      expect(res.status, authorization).toBe(401);
      await res.arrayBuffer();
    }
  });

  const bad: [string, unknown, string][] = [
    ["not JSON", "{key:", "body"],
    ["an array", [], "body"],
    ["null", "null", "body"],
    ["missing key", { limit: 1, window: "1m" }, "key"],
    ["empty key", { key: "", limit: 1, window: "1m" }, "key"],
    ["numeric key", { key: 7, limit: 1, window: "1m" }, "key"],
    ["overlong key", { key: "k".repeat(513), limit: 1, window: "1m" }, "key"],
    ["missing limit", { key: "k", window: "1m" }, "limit"],
    ["zero limit", { key: "k", limit: 0, window: "1m" }, "limit"],
    ["fractional limit", { key: "k", limit: 1.5, window: "1m" }, "limit"],
    ["string limit", { key: "k", limit: "10", window: "1m" }, "limit"],
    ["huge limit", { key: "k", limit: 100_001, window: "1m" }, "limit"],
    ["missing window", { key: "k", limit: 1 }, "window"],
    ["zero window", { key: "k", limit: 1, window: 0 }, "window"],
    ["unknown unit", { key: "k", limit: 1, window: "1y" }, "window"],
    ["window over 7d", { key: "k", limit: 1, window: "8d" }, "window"],
    ["negative window", { key: "k", limit: 1, window: -5 }, "window"],
    ["zero cost", { key: "k", limit: 5, window: "1m", cost: 0 }, "cost"],
    ["cost over limit", { key: "k", limit: 5, window: "1m", cost: 6 }, "cost"],
    ["null cost", { key: "k", limit: 5, window: "1m", cost: null }, "cost"],
    ["unknown field", { key: "k", limit: 5, window: "1m", limt: 6 }, "limt"],
    ["unknown rule", { key: "k", rule: "nope" }, "rule"],
    ["rule and limit", { key: "k", rule: "nope", limit: 1 }, "limit"],
  ];
  for (const [label, body, field] of bad) {
    it(`answers 400 naming "${field}" for ${label}`, async () => {
      const res = await check(body);
      expect(res.status).toBe(400);
      expect(res.headers.get("Content-Type")).toContain("application/problem+json");
      expect(await res.json()).toMatchObject({ status: 400, field });
    });
  }

  it("counts nothing for a request that was not a valid check", async () => {
    const key = `invalid-${run}`;
    await check({ key, limit: 1, window: "1m", cost: 2 });
    await check({ key, limit: 1, window: "1m", extra: true });
    await check({ key, limit: 1, window: "1m" }, { contentType: "text/plain" });
    const res = await check({ key, limit: 1, window: "1m" });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ remaining: 0 });
  });

  it("answers 415 without a JSON content type and 413 for an oversized body", async () => {
    expect(
      (await check({ key: "k", limit: 1, window: "1m" }, { contentType: "text/plain" })).status,
    ).toBe(415);
    const huge = JSON.stringify({ key: "k".repeat(10_000), limit: 1, window: "1m" });
    expect((await check(huge)).status).toBe(413);
  });

  it("answers other methods on /check, /check/peek and /check/reset with a 405 problem", async () => {
    for (const [method, path] of [
      ["GET", "/check"],
      ["PUT", "/check"],
      ["GET", "/check/peek"],
      ["DELETE", "/check/reset"],
    ] as const) {
      const res = await SELF.fetch(`http://limiter${path}`, { method });
      expect(res.status, `${method} ${path}`).toBe(405);
      expect(res.headers.get("Allow")).toBe("POST");
      expect(res.headers.get("Content-Type")).toContain("application/problem+json");
    }
  });

  it("answers an unknown /check/* path with a 404 problem, whatever the method", async () => {
    for (const [method, path] of [
      ["POST", "/check/foo"],
      ["GET", "/check/foo"],
      ["POST", "/check/peek/extra"],
      ["POST", "/check/"],
    ] as const) {
      const res = await SELF.fetch(`http://limiter${path}`, {
        method,
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        ...(method === "POST" ? { body: "{}" } : {}),
      });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.headers.has("Allow")).toBe(false);
      expect(res.headers.get("Content-Type")).toContain("application/problem+json");
      expect(await res.json()).toMatchObject({ status: 404 });
    }
  });
});

describe("per-isolate state shared across requests", () => {
  it("decides concurrent requests of one isolate through Redis (no request borrows another's I/O)", async () => {
    // workerd ties timers, signals and streams to the request that made them: a store client
    // that shared one (e.g. a timeout signal) across requests would fail and fall back here.
    const responses = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        check({ key: `concurrent-${i}-${run}`, limit: 5, window: "1m" }),
      ),
    );
    const sources = await Promise.all(
      responses.map(async (r) => (await r.json<{ source: string }>()).source),
    );
    expect(sources).toEqual(Array(40).fill("redis"));
  });
});
