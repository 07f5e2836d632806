import { describe, expect, it } from "vitest";
import type { Algorithm } from "../../../src/store/algorithm";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { readLog } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// Every test drives the scripts on the caller's clock with explicit values: window edges are
// tested exactly, without sleeping. T is aligned to every window used here.
const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("algorithms");
const store = testStore(5_000);

let member = 0;
function policy(algorithm: Algorithm, name: string, limit: number, windowMs: number) {
  const key = storageKey(prefix, `${algorithm}.${name}`, "client");
  const at = (now: number, cost = 1) =>
    evaluatePolicy(store, {
      redisKey: key,
      algorithm,
      limit,
      windowMs,
      cost,
      memberId: `m${member++}`,
      now,
    });
  return { key, at };
}

describe("fixed-window", () => {
  it("counts per aligned window; reset is the window's end; everything refills at reset", async () => {
    const p = policy("fixed-window", "edges", 3, 1_000);
    expect(await p.at(T)).toMatchObject({ allowed: true, remaining: 2, reset: T + 1_000 });
    expect(await p.at(T + 500)).toMatchObject({ allowed: true, remaining: 1, reset: T + 1_000 });
    expect(await p.at(T + 999)).toMatchObject({ allowed: true, remaining: 0, reset: T + 1_000 });
    expect(await p.at(T + 999)).toMatchObject({
      allowed: false,
      remaining: 0,
      reset: T + 1_000,
      retryAfterMs: 1,
    });
    // At the window's end the whole limit is back at once.
    expect(await p.at(T + 1_000, 3)).toMatchObject({
      allowed: true,
      remaining: 0,
      reset: T + 2_000,
    });
    expect((await p.at(T + 1_999)).allowed).toBe(false);
    // The key lives until the window's end (written at T + 1000: 1000 ms), plus the 1 s grace
    // that caller clocks get for their skew.
    const ttl = await redis.pttl(p.key);
    expect(ttl).toBeGreaterThan(1_500);
    expect(ttl).toBeLessThanOrEqual(2_000);
  });

  it("admits up to twice the limit around a boundary (its documented inaccuracy)", async () => {
    const p = policy("fixed-window", "boundary", 5, 1_000);
    expect((await p.at(T + 999, 5)).allowed).toBe(true);
    expect((await p.at(T + 1_000, 5)).allowed).toBe(true);
    expect((await p.at(T + 1_001)).allowed).toBe(false);
  });
});

describe("sliding-counter", () => {
  it("weights the previous window by the part of it still inside the sliding window", async () => {
    const p = policy("sliding-counter", "weights", 10, 1_000);
    expect(await p.at(T + 100, 10)).toMatchObject({ allowed: true, remaining: 0 });
    // Same window: cur 10 + 1 > 10. In the next window the estimate is 10·(1000 − e)/1000, which
    // leaves room for 1 at e = 100.
    expect(await p.at(T + 200)).toMatchObject({
      allowed: false,
      remaining: 0,
      reset: T + 1_100,
      retryAfterMs: 900,
    });
    expect(await p.at(T + 1_000)).toMatchObject({ allowed: false, retryAfterMs: 100 });
    expect((await p.at(T + 1_099)).allowed).toBe(false);
    expect(await p.at(T + 1_100)).toMatchObject({ allowed: true, remaining: 0 });
    // e = 500: 10 · 0.5 + 1 = 6 in use; 5 more do not fit, 4 do.
    expect(await p.at(T + 1_500, 5)).toMatchObject({
      allowed: false,
      remaining: 4,
      // 10·(1000 − e)/1000 + 1 + 5 ≤ 10 from e = 600.
      reset: T + 1_600,
      retryAfterMs: 100,
    });
    expect(await p.at(T + 1_500, 4)).toMatchObject({ allowed: true, remaining: 0 });
    // e = 600: 10 · 0.4 + 5 = 9 in use.
    expect(await p.at(T + 1_600)).toMatchObject({ allowed: true, remaining: 0 });
    // Two windows on, the first window weighs nothing and the second (6 units) weighs 0.5.
    expect(await p.at(T + 2_500)).toMatchObject({ allowed: true, remaining: 6 });
    expect(await p.at(T + 4_000, 10)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("keeps one small string per key, whatever the limit, with a TTL to the next window's end", async () => {
    const p = policy("sliding-counter", "state", 100_000, 1_000);
    expect((await p.at(T + 250, 99_999)).allowed).toBe(true);
    expect(await redis.type(p.key)).toBe("string");
    // `<last admission>:<window>:<current>:<previous>` (see sliding-counter.lua.ts).
    expect(await redis.get<string>(p.key)).toBe(`${T + 250}:1000:99999:0`);
    const ttl = await redis.pttl(p.key);
    // To the next window's end (1750 ms from T + 250) plus the caller-clock grace (1000 ms).
    expect(ttl).toBeGreaterThan(2_000);
    expect(ttl).toBeLessThanOrEqual(2_750);
  });
});

describe("token-bucket", () => {
  it("allows a burst of the limit, then refills one token every window/limit ms", async () => {
    const p = policy("token-bucket", "burst", 10, 1_000);
    for (let i = 0; i < 10; i++) {
      expect(await p.at(T)).toMatchObject({ allowed: true, remaining: 9 - i });
    }
    expect(await p.at(T)).toMatchObject({
      allowed: false,
      remaining: 0,
      reset: T + 100,
      retryAfterMs: 100,
    });
    expect((await p.at(T + 99)).allowed).toBe(false);
    // 250 ms refill 2.5 tokens: 2 pass; the third waits for the half token still missing.
    expect(await p.at(T + 250)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await p.at(T + 250)).toMatchObject({ allowed: true, remaining: 0, reset: T + 300 });
    expect(await p.at(T + 250)).toMatchObject({ allowed: false, retryAfterMs: 50 });
    // retryAfterMs is when enough tokens for the cost exist: 5 tokens need 450 ms more.
    expect(await p.at(T + 250, 5)).toMatchObject({
      allowed: false,
      remaining: 0,
      reset: T + 700,
      retryAfterMs: 450,
    });
    expect((await p.at(T + 699, 5)).allowed).toBe(false);
    expect(await p.at(T + 700, 5)).toMatchObject({ allowed: true, remaining: 0 });
    // Idle for a full window: the bucket is full again, never fuller.
    expect(await p.at(T + 5_000, 10)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await p.at(T + 5_000)).allowed).toBe(false);
  });

  it("refills exactly at a rate that is not a whole number of ms (3 per second)", async () => {
    const p = policy("token-bucket", "thirds", 3, 1_000);
    expect(await p.at(T, 3)).toMatchObject({ allowed: true, remaining: 0 });
    // One token per 333⅓ ms.
    expect(await p.at(T)).toMatchObject({ allowed: false, retryAfterMs: 334 });
    expect((await p.at(T + 333)).allowed).toBe(false);
    expect((await p.at(T + 334)).allowed).toBe(true);
    expect((await p.at(T + 666)).allowed).toBe(false);
    expect((await p.at(T + 667)).allowed).toBe(true);
    // 3000 admissions at exactly the refill rate never drift: all pass, none more.
    const q = policy("token-bucket", "steady", 3, 1_000);
    expect((await q.at(T, 3)).allowed).toBe(true);
    for (let second = 1; second <= 50; second++) {
      expect((await q.at(T + second * 1_000, 3)).allowed, `second ${second}`).toBe(true);
      expect((await q.at(T + second * 1_000)).allowed, `second ${second}`).toBe(false);
    }
  });

  it("lets its key expire when the bucket is full again", async () => {
    const p = policy("token-bucket", "ttl", 10, 1_000);
    await p.at(T, 4);
    const ttl = await redis.pttl(p.key);
    // Full again after 4 tokens × 100 ms, plus the caller-clock grace (1000 ms).
    expect(ttl).toBeGreaterThan(900);
    expect(ttl).toBeLessThanOrEqual(1_400);
  });
});

describe("a denied request consumes nothing", () => {
  const algorithms: Algorithm[] = [
    "sliding-log",
    "fixed-window",
    "sliding-counter",
    "token-bucket",
  ];
  for (const algorithm of algorithms) {
    it(`in ${algorithm}: a costly denial leaves the state untouched; a fitting one still passes`, async () => {
      const p = policy(algorithm, "costly", 10, 60_000);
      expect(await p.at(T + 10, 7)).toMatchObject({ allowed: true, remaining: 3 });
      const snapshot = async () =>
        algorithm === "sliding-log"
          ? JSON.stringify(await readLog(redis, p.key))
          : await redis.get<string>(p.key);
      const before = await snapshot();
      for (let i = 0; i < 5; i++) {
        expect(await p.at(T + 20, 4)).toMatchObject({ allowed: false, remaining: 3 });
      }
      expect(await snapshot()).toBe(before);
      expect(await p.at(T + 30, 3)).toMatchObject({ allowed: true, remaining: 0 });
    });

    it(`in ${algorithm}: a denial on a fresh key creates no key`, async () => {
      const p = policy(algorithm, "fresh", 5, 60_000);
      expect((await p.at(T, 6)).allowed).toBe(false);
      expect(await redis.exists(p.key)).toBe(0);
    });
  }
});

describe("keys", () => {
  it("one policy name under two algorithms keeps two states (a changed rule never misreads)", async () => {
    const keys = (["sliding-log", "fixed-window", "sliding-counter", "token-bucket"] as const).map(
      (algorithm) => storageKey(prefix, "switch", "client", algorithm),
    );
    expect(new Set(keys).size).toBe(4);
    for (const [i, algorithm] of (
      ["sliding-log", "fixed-window", "sliding-counter", "token-bucket"] as const
    ).entries()) {
      const result = await evaluatePolicy(store, {
        redisKey: keys[i] ?? "",
        algorithm,
        limit: 2,
        windowMs: 60_000,
        cost: 2,
        memberId: `k${i}`,
        now: T,
      });
      expect(result, algorithm).toMatchObject({ allowed: true, remaining: 0 });
    }
  });
});

describe("the Redis clock (no caller clock)", () => {
  const algorithms: Algorithm[] = ["fixed-window", "sliding-counter", "token-bucket"];
  for (const algorithm of algorithms) {
    it(`${algorithm} admits exactly the limit of 300 concurrent decisions`, async () => {
      const key = storageKey(prefix, `${algorithm}.redis-clock`, "client");
      const results = await Promise.all(
        Array.from({ length: 300 }, (_, i) =>
          evaluatePolicy(store, {
            redisKey: key,
            algorithm,
            limit: 50,
            windowMs: 3_600_000,
            cost: 1,
            memberId: `r${i}`,
          }),
        ),
      );
      expect(results.filter((r) => r.allowed)).toHaveLength(50);
      // On the Redis clock the TTL is exact: at most the hour (fixed window: to the hour's end;
      // counter: to the next hour's end; bucket: 50 tokens × 72 s = the hour).
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(algorithm === "sliding-counter" ? 7_200_000 : 3_600_000);
      const now = Date.now();
      // The store's clock is Redis's: close to this machine's.
      for (const r of results) expect(Math.abs(r.now - now)).toBeLessThan(60_000);
    });
  }
});
