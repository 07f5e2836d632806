import { describe, expect, it } from "vitest";
import app, { type Bindings } from "../../examples/hono-app/app";
import { logCount } from "../support/worker/log-state";
import { scopedPrefix, testRedis } from "../support/worker/redis";
import { baseEnv } from "../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("example");
const env: Bindings = {
  UPSTASH_REDIS_REST_URL: baseEnv.UPSTASH_REDIS_REST_URL as string,
  UPSTASH_REDIS_REST_TOKEN: baseEnv.UPSTASH_REDIS_REST_TOKEN as string,
  LIMITER_PREFIX: prefix,
};
const call = (path: string, init: RequestInit = {}) =>
  Promise.resolve(app.fetch(new Request(`https://example.test${path}`, init), env));

describe("the example Hono app with the rateLimit middleware", () => {
  it("limits /api/* per IP with the standard headers and exposes the result on the context", async () => {
    const headers = { "CF-Connecting-IP": "203.0.113.50" };
    const first = await call("/api/items", { headers });
    expect(first.status).toBe(200);
    expect(first.headers.get("RateLimit-Policy")).toBe('"api";q=5;w=60');
    expect(first.headers.get("RateLimit")).toMatch(/^"api";r=4;t=(59|60)$/);
    expect(await first.json()).toEqual({ items: [1, 2, 3], remaining: [["api", 4]] });
    for (let i = 0; i < 4; i++) expect((await call("/api/items", { headers })).status).toBe(200);
    const denied = await call("/api/items", { headers });
    expect(denied.status).toBe(429);
    expect(denied.headers.get("Content-Type")).toContain("application/problem+json");
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThanOrEqual(59);
    expect(await denied.json()).toMatchObject({ status: 429, violated: ["api"] });
    // Another address is another client.
    expect(
      (await call("/api/items", { headers: { "CF-Connecting-IP": "203.0.113.51" } })).status,
    ).toBe(200);
  });

  it("applies several rules: the write rule only to writes, passing only if all allow", async () => {
    const headers = { "CF-Connecting-IP": "203.0.113.60" };
    const created = await call("/api/items", { method: "POST", headers });
    expect(created.status).toBe(201);
    expect(created.headers.get("RateLimit-Policy")).toBe('"api";q=5;w=60, "writes";q=2;w=60');
    expect((await call("/api/items", { method: "POST", headers })).status).toBe(201);
    const denied = await call("/api/items", { method: "POST", headers });
    expect(denied.status).toBe(429);
    expect(await denied.json()).toMatchObject({ violated: ["writes"] });
  });

  it("skips what the skip predicate names: no store call, no headers", async () => {
    for (let i = 0; i < 8; i++) {
      const res = await call("/api/health", { headers: { "CF-Connecting-IP": "203.0.113.70" } });
      expect(res.status).toBe(200);
      expect(res.headers.has("RateLimit")).toBe(false);
    }
    expect(await redis.keys(`${prefix}:api:{203.0.113.70}`)).toEqual([]);
  });

  it("keys by a key function, answers with the custom handler, and denies a missing key", async () => {
    const user = { "X-User-Id": `user-${prefix}` };
    expect((await call("/reports/monthly", { headers: user })).status).toBe(200);
    const denied = await call("/reports/monthly", { headers: user });
    expect(denied.status).toBe(429);
    expect(await denied.json()).toEqual({ error: "report quota used up", policies: ["reports"] });
    // The custom answer still carries the headers.
    expect(denied.headers.get("RateLimit-Policy")).toBe('"reports";q=1;w=3600');
    expect(Number(denied.headers.get("Retry-After"))).toBeGreaterThan(3590);
    // The key function's value is used as given: the log is under the user id.
    expect(await logCount(redis, `${prefix}:reports:{user-${prefix}}`)).toBe(1);
    expect((await call("/reports/monthly")).status).toBe(400);
  });

  it("a request without the key function's header is refused naming the key function, not the IP", async () => {
    const res = await call("/reports/monthly", { headers: { "CF-Connecting-IP": "203.0.113.80" } });
    expect(res.status).toBe(400);
    const body = await res.json<{ detail: string; policy: string }>();
    expect(body.policy).toBe("reports");
    expect(body.detail).toBe(
      'rate limit "reports" found no client key: the app\'s key function returned no key',
    );
  });
});
