import { describe, expect, inject, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { createDenialCache } from "../../../src/limiter/denial-cache";
import type { LimiterOptions } from "../../../src/limiter/limiter-options";
import { denialCacheKey } from "../../../src/limiter/resolved-policy";
import { storageKey } from "../../../src/store/keys";
import { counting, manualClock, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, TEST_DEADLINE_MS, testRedis } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("denial-cache");

/**
 * A limiter on the real bridge, on a clock the test moves (the caller's clock goes to Redis),
 * with these options besides.
 */
function limiterOnClock(start?: number, options: Partial<LimiterOptions> = {}) {
  const clock = manualClock(start);
  const counted = counting(storeAt(inject("bridgeUrl"), 5_000));
  const limiter = createLimiter({
    store: counted.store,
    prefix,
    clock: "caller",
    now: clock.now,
    timeoutMs: TEST_DEADLINE_MS,
    ...options,
  });
  return { limiter, clock, calls: counted.calls };
}

describe("a flooding denied key", () => {
  it("costs no store call once exhausted, and is let through exactly when the log frees capacity", async () => {
    const { limiter, clock, calls } = limiterOnClock();
    const t = clock.now();
    const ask = () => limiter.limit({ policy: "flood", key: "k", limit: 5, windowMs: 60_000 });
    for (let i = 0; i < 5; i++) {
      clock.set(t + i * 1_000);
      expect(await ask()).toMatchObject({ allowed: true, source: "redis" });
    }
    // Store calls from here on (the first EVALSHA may have needed an EVAL: another test flushes).
    const base = calls();
    const made = () => calls() - base;

    clock.set(t + 10_000);
    const flood = await Promise.all(Array.from({ length: 500 }, ask));
    expect(flood.every((d) => !d.allowed && d.source === "cache")).toBe(true);
    // The fifth admission left 0: the cache knew the key was full without asking again.
    expect(made()).toBe(0);
    expect(flood[0]?.retryAfterMs).toBe(50_000);

    // The first admission (at t) leaves the window at t + 60000: not a millisecond earlier …
    clock.set(t + 59_999);
    expect(await ask()).toMatchObject({ allowed: false, source: "cache", retryAfterMs: 1 });
    expect(made()).toBe(0);
    // … and not later: at t + 60000 the check goes to Redis, which admits it.
    clock.set(t + 60_000);
    expect(await ask()).toMatchObject({ allowed: true, source: "redis", remaining: 0 });
    expect(made()).toBe(1);
    // Full again until the second admission (t + 1000) leaves.
    clock.set(t + 60_500);
    expect(await ask()).toMatchObject({ allowed: false, source: "cache", retryAfterMs: 500 });
    expect(made()).toBe(1);
    expect(await logCount(redis, storageKey(prefix, "flood", "k"))).toBe(5);
  });

  it("on the Redis clock: a real flood of 1000 denied checks makes at most a handful of store calls", async () => {
    const counted = counting(storeAt(inject("bridgeUrl"), 5_000));
    const limiter = createLimiter({ store: counted.store, prefix, timeoutMs: TEST_DEADLINE_MS });
    const ask = () => limiter.limit({ policy: "real", key: "k", limit: 3, windowMs: 60_000 });
    for (let i = 0; i < 3; i++) expect((await ask()).allowed).toBe(true);
    const before = counted.calls();
    let denied = 0;
    for (let i = 0; i < 1_000; i++) if (!(await ask()).allowed) denied++;
    expect(denied).toBe(1_000);
    expect(counted.calls() - before).toBeLessThanOrEqual(3);
  });

  it("never denies what Redis admits when another isolate consumed meanwhile or time freed units", async () => {
    const a = limiterOnClock();
    const b = limiterOnClock();
    const t = a.clock.now();
    const req = { policy: "two", key: "k", limit: 2, windowMs: 60_000 };
    a.clock.set(t);
    expect((await a.limiter.limit(req)).allowed).toBe(true);
    b.clock.set(t + 30_000);
    expect((await b.limiter.limit(req)).allowed).toBe(true);
    a.clock.set(t + 30_001);
    // a learns the key is full until t + 60000 (when its own first admission leaves).
    expect(await a.limiter.limit(req)).toMatchObject({ allowed: false, source: "redis" });
    expect(await a.limiter.limit(req)).toMatchObject({ allowed: false, source: "cache" });
    a.clock.set(t + 60_000);
    expect(await a.limiter.limit(req)).toMatchObject({ allowed: true, source: "redis" });
  });
});

describe("cost-aware", () => {
  it("a denial of a large cost does not deny a smaller cost that fits", async () => {
    const { limiter, clock, calls } = limiterOnClock(1_800_000_100_000);
    const other = limiterOnClock(1_800_000_100_000);
    const t = clock.now();
    const req = { policy: "cost", key: "k", limit: 10, windowMs: 60_000 };
    const ask = (cost: number) => limiter.limit({ ...req, cost });
    // Another isolate takes 7 of 10: this one knows nothing yet.
    expect(await other.limiter.limit({ ...req, cost: 7 })).toMatchObject({ remaining: 3 });
    clock.set(t + 1);
    expect(await ask(5)).toMatchObject({ allowed: false, remaining: 3, source: "redis" });
    const base = calls();
    // Cost 5 (and more) is now answered from memory …
    expect(await ask(5)).toMatchObject({ allowed: false, remaining: 3, source: "cache" });
    expect(await ask(8)).toMatchObject({ allowed: false, source: "cache" });
    expect(calls() - base).toBe(0);
    // … a cost between what remains and the denied cost still asks Redis (denied there) …
    expect(await ask(4)).toMatchObject({ allowed: false, source: "redis" });
    // … and a smaller cost that fits is admitted.
    expect(await ask(3)).toMatchObject({ allowed: true, remaining: 0, source: "redis" });
    expect(calls() - base).toBe(2);
    expect(await logCount(redis, storageKey(prefix, "cost", "k"))).toBe(10);
    // Full now: even cost 1 is denied from memory, until the 7 leave at t + 60000.
    expect(await ask(1)).toMatchObject({ allowed: false, source: "cache" });
    clock.set(t + 60_000);
    expect(await ask(7)).toMatchObject({ allowed: true, source: "redis" });
  });

  it("a cached denial for one limit does not answer an ad-hoc check with a higher limit", async () => {
    const { limiter } = limiterOnClock(1_800_000_200_000);
    const req = { policy: "adhoc", key: "k", windowMs: 60_000 };
    expect((await limiter.limit({ ...req, limit: 1 })).allowed).toBe(true);
    expect(await limiter.limit({ ...req, limit: 1 })).toMatchObject({ source: "cache" });
    expect(await limiter.limit({ ...req, limit: 2 })).toMatchObject({
      allowed: true,
      source: "redis",
    });
  });
});

describe("single flight", () => {
  it("concurrent checks of a key known to be full share one store call when it still denies", async () => {
    const a = limiterOnClock(1_800_000_300_000);
    const b = limiterOnClock();
    const t = a.clock.now();
    const req = { policy: "sf", key: "k", limit: 1, windowMs: 60_000 };
    expect((await a.limiter.limit(req)).allowed).toBe(true);
    // Another isolate takes the unit that frees at t + 60000, before `a` asks again.
    b.clock.set(t + 60_000);
    expect((await b.limiter.limit(req)).allowed).toBe(true);
    a.clock.set(t + 60_001);
    const before = a.calls();
    const burst = await Promise.all(Array.from({ length: 100 }, () => a.limiter.limit(req)));
    expect(burst.every((d) => !d.allowed)).toBe(true);
    expect(a.calls() - before).toBe(1);
    expect(burst.filter((d) => d.source === "cache")).toHaveLength(99);
  });
});

describe("a cache shared with the limiter", () => {
  it("an entry remembered by hand (no retryAt) denies with a Retry-After up to its until", async () => {
    const clock = manualClock();
    const cache = createDenialCache();
    const limiter = createLimiter({
      store: storeAt(inject("bridgeUrl"), 5_000),
      prefix,
      now: clock.now,
      timeoutMs: TEST_DEADLINE_MS,
      denialCache: cache,
    });
    const request = { policy: "by-hand", key: "k", limit: 5, windowMs: 60_000 };
    cache.remember(
      denialCacheKey(request),
      { minCost: 1, remaining: 0, until: clock.now() + 1_500 },
      clock.now(),
    );
    expect(await limiter.limit(request)).toMatchObject({
      allowed: false,
      source: "cache",
      retryAfterMs: 1_500,
    });
  });
});

describe("bounded", () => {
  it("a flood of distinct keys leaves the cache at its cap (LRU), the hot key still cached", () => {
    const cache = createDenialCache({ maxEntries: 100 });
    const now = 1_000;
    cache.remember("hot", { minCost: 1, remaining: 0, until: 10_000 }, now);
    for (let i = 0; i < 10_000; i++) {
      cache.remember(`k${i}`, { minCost: 1, remaining: 0, until: 10_000 }, now);
      if (i % 50 === 0) expect(cache.lookup("hot", 1, now).hit).toBe(true);
    }
    expect(cache.size).toBe(100);
    expect(cache.lookup("k0", 1, now).hit).toBe(false);
    expect(cache.lookup("k9999", 1, now).hit).toBe(true);
  });

  it("expired entries do not pile up, and an expired entry never denies", () => {
    const cache = createDenialCache({ maxEntries: 1_000 });
    for (let i = 0; i < 500; i++)
      cache.remember(`old${i}`, { minCost: 1, remaining: 0, until: 10 }, 0);
    expect(cache.lookup("old1", 1, 10).hit).toBe(false);
    for (let i = 0; i < 300; i++)
      cache.remember(`new${i}`, { minCost: 1, remaining: 0, until: 99 }, 20);
    // Each write swept up to two expired entries from the old end.
    expect(cache.size).toBeLessThanOrEqual(300);
  });

  it("the limiter's own cache stays at its cap under a flood of exhausted keys", async () => {
    const cache = createDenialCache({ maxEntries: 20 });
    const { limiter } = limiterOnClock(undefined, { denialCache: cache });
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        limiter.limit({ policy: "many", key: `k${i}`, limit: 1, windowMs: 60_000 }),
      ),
    );
    expect(cache.size).toBe(20);
  });
});
