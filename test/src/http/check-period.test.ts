import { SELF } from "cloudflare:test";
import { afterAll, describe, expect, it } from "vitest";
import { deleteKeys, testRedis } from "../../support/worker/redis";

const TOKEN = "test-limiter-token"; // bound in vitest.config.ts
const run = crypto.randomUUID();
const redis = testRedis();

afterAll(async () => {
  await deleteKeys(redis, `edge-limiter:*${run}*`);
});

function check(body: unknown) {
  return SELF.fetch("http://limiter/check", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(body),
  });
}

const DAY = 86_400_000;

describe("POST /check with a calendar period", () => {
  it("admits up to the limit, then 429 with Retry-After to the next period's start", async () => {
    const key = `period-${run}`;
    const body = { key, limit: 2, period: "day", timezone: "Etc/GMT-14", cost: 1 };
    const first = await check(body);
    expect(first.status).toBe(200);
    const answer = await first.json<{ reset: number; remaining: number }>();
    expect(answer.remaining).toBe(1);
    // Midnight at +14:00 is 10:00 UTC: the store's day there ends at the next one.
    expect((answer.reset - 10 * 3_600_000) % DAY).toBe(0);
    expect(answer.reset).toBeGreaterThan(Date.now() - 5_000);
    expect(answer.reset).toBeLessThanOrEqual(Date.now() + DAY + 5_000);
    expect(first.headers.get("RateLimit-Policy")).toMatch(/;q=2;w=90000$/);

    expect((await check(body)).status).toBe(200);
    const denied = await check(body);
    expect(denied.status).toBe(429);
    const deniedBody = await denied.json<{ reset: number; retryAfterMs: number }>();
    // (From the denial cache, on this isolate's clock: within a few ms of the store's.)
    expect(Math.abs(deniedBody.reset - answer.reset)).toBeLessThan(1_000);
    expect(Number(denied.headers.get("Retry-After"))).toBe(
      Math.ceil(deniedBody.retryAfterMs / 1000),
    );
    expect(deniedBody.retryAfterMs).toBeGreaterThan(0);
    // Another zone is another counter for the same key.
    expect((await check({ ...body, timezone: "UTC" })).status).toBe(200);
  });

  const bad: [string, Record<string, unknown>, string][] = [
    ["window and period", { limit: 5, window: "1m", period: "day" }, "period"],
    ["an unknown period", { limit: 5, period: "year" }, "period"],
    [
      "an unknown timezone",
      { limit: 5, period: "month", timezone: "Mars/Olympus_Mons" },
      "timezone",
    ],
    ["a timezone without a period", { limit: 5, window: "1m", timezone: "UTC" }, "timezone"],
    ["an anchor without an offset", { limit: 5, period: "month", anchor: "2026-01-31" }, "anchor"],
    [
      "an anchor on a day that is not",
      { limit: 5, period: "month", anchor: "2026-02-30T00:00:00Z" },
      "anchor",
    ],
    [
      "an anchor that is not a string",
      { limit: 5, period: "week", anchor: 1767225600000 },
      "anchor",
    ],
    [
      "a log algorithm with a period",
      { limit: 5, period: "day", algorithm: "sliding-log" },
      "algorithm",
    ],
    [
      "algorithm calendar without a period",
      { limit: 5, window: "1m", algorithm: "calendar" },
      "period",
    ],
    ["a lease on a period", { limit: 5, period: "day", lease: true }, "lease"],
  ];
  for (const [label, fields, field] of bad) {
    it(`answers 400 naming "${field}" for ${label}, and counts nothing`, async () => {
      const key = `bad-${run}-${crypto.randomUUID()}`;
      const response = await check({ key, ...fields });
      expect(response.status).toBe(400);
      const problem = await response.json<{ field?: string; detail?: string }>();
      expect(JSON.stringify(problem)).toContain(field);
      expect(await redis.keys(`edge-limiter:*${key}*`)).toEqual([]);
    });
  }

  it("names both fields when window and period are given", async () => {
    const response = await check({ key: `both-${run}`, limit: 5, window: "1m", period: "day" });
    const problem = await response.json<Record<string, unknown>>();
    expect(JSON.stringify(problem)).toMatch(/period.*window/);
  });
});
