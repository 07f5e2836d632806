// @upstash/ratelimit 2.x through the bridge: its scripts start with
// `#!lua flags=allow-key-locking` and are called by EVALSHA of that text, so this only works if
// the bridge strips the flag and maps the SHA.
import { Ratelimit } from "@upstash/ratelimit";
import { afterAll, describe, expect, it } from "vitest";
import { bridgeRedis, deletePrefix, uniquePrefix } from "../support/bridge-client.js";

const redis = bridgeRedis();
const prefix = uniquePrefix("ratelimit");

afterAll(async () => {
  await deletePrefix(redis, prefix);
});

// An hour, not seconds: the anchor's windows are aligned to the clock, and 7 calls that straddle a
// window's end see the count restart (slidingWindow then admits a 6th). With 10 s windows that
// happened about once in a hundred runs; with an hour, about once in tens of thousands.
const limiters = {
  slidingWindow: Ratelimit.slidingWindow(5, "1 h"),
  fixedWindow: Ratelimit.fixedWindow(5, "1 h"),
  tokenBucket: Ratelimit.tokenBucket(1, "1 h", 5),
};

describe.each(Object.entries(limiters))("Ratelimit.%s(5, …)", (name, limiter) => {
  it("allows 5 requests, then denies", async () => {
    const ratelimit = new Ratelimit({
      redis,
      limiter,
      prefix: `${prefix}${name}`,
      analytics: false,
      ephemeralCache: false, // every answer must come from Redis
    });
    const seen: { success: boolean; remaining: number }[] = [];
    for (let i = 0; i < 7; i++) {
      const { success, remaining } = await ratelimit.limit("client-a");
      seen.push({ success, remaining });
    }
    expect(seen.map((s) => s.success)).toEqual([true, true, true, true, true, false, false]);
    expect(seen.slice(0, 5).map((s) => s.remaining)).toEqual([4, 3, 2, 1, 0]);
    // Another identifier has its own budget.
    expect((await ratelimit.limit("client-b")).success).toBe(true);
    // And the state is really in Redis, under our prefix.
    // Every SCAN page: the shared Redis may hold many other keys, and one page can miss ours.
    const keys: string[] = [];
    let cursor = "0";
    do {
      const [next, page] = await redis.scan(cursor, { match: `${prefix}${name}*`, count: 1000 });
      cursor = String(next);
      keys.push(...page);
    } while (cursor !== "0");
    expect(keys.length).toBeGreaterThan(0);
  });
});

it("keeps limiting after SCRIPT FLUSH (EVALSHA → NOSCRIPT → EVAL)", async () => {
  const ratelimit = new Ratelimit({
    redis,
    limiter: Ratelimit.slidingWindow(3, "10 s"),
    prefix: `${prefix}flush`,
    analytics: false,
    ephemeralCache: false,
  });
  expect((await ratelimit.limit("c")).success).toBe(true);
  await redis.scriptFlush();
  expect((await ratelimit.limit("c")).success).toBe(true);
  expect((await ratelimit.limit("c")).success).toBe(true);
  expect((await ratelimit.limit("c")).success).toBe(false);
});
