import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import {
  createLimiter,
  type RateLimitVariables,
  type RefundFailedEvent,
  rateLimit,
} from "../../../src/index";
import { createDenialCache } from "../../../src/limiter/denial-cache";
import { faultScenario, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("middleware");
const limiter = createLimiter({
  store: testStore(2_000),
  prefix,
});

describe("rateLimit middleware", () => {
  it("a period rule: its quota up to the limit, then 429 with Retry-After to the period's start", async () => {
    // 23:00 in Berlin on February 28: March (and its quota) starts in an hour.
    let clock = Date.parse("2026-02-28T22:00:00Z");
    const calendar = createLimiter({
      store: testStore(2_000),
      prefix,
      clock: "caller",
      now: () => clock,
    });
    const app = new Hono();
    const key = `period-${crypto.randomUUID()}`;
    app.use(
      rateLimit({
        limiter: calendar,
        rules: { name: "monthly", limit: 2, period: "month", timezone: "Europe/Berlin" },
        key: () => key,
      }),
    );
    app.get("/", (c) => c.text("ok"));
    expect((await app.request("/")).status).toBe(200);
    expect((await app.request("/")).status).toBe(200);
    const denied = await app.request("/");
    expect(denied.status).toBe(429);
    expect(denied.headers.get("Retry-After")).toBe("3600");
    expect(denied.headers.get("RateLimit")).toBe('"monthly";r=0;t=3600');
    clock = Date.parse("2026-02-28T23:00:00Z");
    const march = await app.request("/");
    expect(march.status).toBe(200);
    expect(march.headers.get("RateLimit")).toMatch(/^"monthly";r=1;t=\d+$/);
  });

  it("answers 503 for every request when its rules are invalid: never unprotected", async () => {
    const app = new Hono();
    app.use(rateLimit({ limiter, rules: { name: "bad", limit: 0, window: "1m" } }));
    app.get("/", (c) => c.text("should not run"));
    const res = await app.request("/");
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ field: "rules[0].limit" });
  });

  it("shadow rules add headers and sit on the context but never deny", async () => {
    const app = new Hono<{ Variables: RateLimitVariables }>();
    app.use(
      rateLimit({
        limiter,
        rules: { name: "shadow", limit: 1, window: "1m", shadow: true },
        key: () => "one",
      }),
    );
    app.get("/", (c) => c.json(c.get("rateLimit")));
    await app.request("/");
    const res = await app.request("/");
    expect(res.status).toBe(200);
    expect(res.headers.get("RateLimit")).toMatch(/^"shadow";r=0;/);
    expect(res.headers.has("Retry-After")).toBe(false);
    expect(await res.json()).toMatchObject({
      allowed: true,
      shadowDenied: ["shadow"],
      violated: [],
    });
  });

  it("reports shadow denials to onShadowDeny, and writes nothing to the console itself", async () => {
    const events: unknown[] = [];
    const app = new Hono();
    app.use(
      rateLimit({
        limiter,
        rules: { name: "shadow-hook", limit: 1, window: "1m", shadow: true },
        key: () => "one",
        onShadowDeny: (event) => events.push(event),
      }),
    );
    app.get("/", (c) => c.text("ok"));
    const lines: unknown[] = [];
    const original = console.log;
    console.log = (...args: unknown[]) => lines.push(args);
    try {
      for (let i = 0; i < 2; i++) expect((await app.request("/")).status).toBe(200);
    } finally {
      console.log = original;
    }
    expect(events).toEqual([
      expect.objectContaining({ event: "shadow-deny", policy: "shadow-hook", limit: 1 }),
    ]);
    expect(lines).toEqual([]);
  });

  it("adds headers to responses the handler builds, legacy ones when asked", async () => {
    const app = new Hono();
    app.use(
      rateLimit({
        limiter,
        rules: { name: "legacy", limit: 10, window: "10s" },
        key: () => "k",
        legacyHeaders: true,
      }),
    );
    app.get("/", () => new Response("raw", { status: 202, headers: { "Set-Cookie": "a=1" } }));
    const res = await app.request("/");
    expect(res.status).toBe(202);
    expect(await res.text()).toBe("raw");
    expect(res.headers.get("Set-Cookie")).toBe("a=1");
    expect(res.headers.get("RateLimit-Policy")).toBe('"legacy";q=10;w=10');
    expect(res.headers.get("X-RateLimit-Remaining")).toBe("9");
  });
});

describe("rateLimit middleware, store failing at refund time", () => {
  it("reports a refund it could not make through onRefundFailed (and logs nothing itself)", async () => {
    const store = await faultScenario("forward");
    const failing = createLimiter({ store: storeAt(store.url, 2_000), prefix });
    const events: RefundFailedEvent[] = [];
    const app = new Hono();
    app.use(
      rateLimit({
        limiter: failing,
        rules: { name: "refund-fails", limit: 5, window: "1m", refundOn: "5xx" },
        key: () => "client",
        onRefundFailed: (event) => events.push(event),
      }),
    );
    app.get("/", async (c) => {
      // Admitted through the store; now the store breaks before the app answers 5xx.
      await store.set("error-500");
      return c.text("origin failed", 500);
    });
    const response = await app.request("/");
    expect(response.status).toBe(500);
    expect(events).toEqual([
      { event: "refund-failed", policies: ["refund-fails"], error: expect.any(String) },
    ]);
    // Nothing came back, so the headers keep the count the request was admitted with.
    expect(response.headers.get("RateLimit")).toMatch(/^"refund-fails";r=4;t=/);
  });
});

describe("rateLimit middleware, keys of any length", () => {
  it("a key() of 100 kB counts in its own bucket under a digest: Redis and the cache stay small", async () => {
    const cache = createDenialCache();
    const longKeys = createLimiter({ store: testStore(2_000), prefix, denialCache: cache });
    const app = new Hono();
    app.use(
      rateLimit({
        limiter: longKeys,
        rules: { name: "long-key", limit: 1, window: "1m" },
        // An app keyed on a long token: each client's token, whole.
        key: (c) => c.req.header("x-token"),
      }),
    );
    app.get("/", (c) => c.text("ok"));
    const token = (i: number) => `${String(i).padStart(6, "0")}${"t".repeat(100_000)}`;
    const send = (i: number) => app.request("/", { headers: { "x-token": token(i) } });
    expect((await send(0)).status).toBe(200);
    expect((await send(0)).status).toBe(429);
    for (let i = 1; i <= 40; i++) {
      expect((await send(i)).status).toBe(200);
      expect((await send(i)).status).toBe(429);
    }
    // 41 denied keys remembered, each as a 72-character digest, not 100 kB.
    expect(cache.size).toBe(41);
    expect(cache.bytes).toBeLessThan(41 * 400);
    const keys = await testRedis().keys(`${prefix}:long-key:*`);
    expect(keys).toHaveLength(41);
    for (const key of keys) expect(key.length).toBeLessThan(prefix.length + 100);
  });
});
