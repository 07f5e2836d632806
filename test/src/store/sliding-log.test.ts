import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { EVALUATE_SCRIPTS } from "../../../src/store/lua/scripts";
import { scriptSha } from "../../../src/store/script-runner";
import { counting, faultScenario, storeAt } from "../../support/worker/fault-control";
import { LOG_LAYOUTS, logCount, readLog } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const filePrefix = scopedPrefix("sliding-log");
const prefix = filePrefix;

function count<T>(items: T[], predicate: (item: T) => boolean): number {
  return items.filter(predicate).length;
}

// Every exactness test runs against both layouts of the log (the ring is the default). They share
// the unsuffixed key, so each layout gets its own prefix here.
for (const algorithm of LOG_LAYOUTS) {
  const prefix = `${filePrefix}:${algorithm}`;

  describe(`${algorithm}`, () => {
    describe("exactness under concurrency", () => {
      it("admits exactly the limit of 1000 concurrent decisions through one limiter", async () => {
        const limiter = createLimiter({ store: testStore(5_000), timeoutMs: 5_000, prefix });
        const decisions = await Promise.all(
          Array.from({ length: 1000 }, () =>
            limiter.limit({
              policy: "one",
              key: "client",
              limit: 100,
              windowMs: 60_000,
              algorithm,
            }),
          ),
        );
        expect(count(decisions, (d) => d.allowed)).toBe(100);
        expect(decisions.every((d) => d.source === "redis")).toBe(true);
        expect(await logCount(redis, storageKey(prefix, "one", "client"))).toBe(100);
      });

      it("admits exactly the limit across independent limiters (separate clients, like isolates)", async () => {
        const limiters = [0, 1, 2].map(() =>
          createLimiter({ store: testStore(5_000), timeoutMs: 5_000, prefix }),
        );
        const decisions = await Promise.all(
          Array.from({ length: 1200 }, (_, i) =>
            (limiters[i % limiters.length] ?? limiters[0])?.limit({
              policy: "many",
              key: "client",
              limit: 100,
              windowMs: 60_000,
              algorithm,
            }),
          ),
        );
        expect(count(decisions, (d) => d?.allowed === true)).toBe(100);
        expect(await logCount(redis, storageKey(prefix, "many", "client"))).toBe(100);
      });

      it("counts a burst that shares one millisecond in full (the timestamp-as-member bug)", async () => {
        const store = testStore(5_000);
        const key = storageKey(prefix, "burst", "client");
        const now = 1_700_000_000_000;
        const results = await Promise.all(
          Array.from({ length: 1000 }, (_, i) =>
            evaluatePolicy(store, {
              redisKey: key,
              algorithm,
              limit: 100,
              windowMs: 60_000,
              cost: 1,
              memberId: `m${i}`,
              now,
            }),
          ),
        );
        expect(count(results, (r) => r.allowed)).toBe(100);
        expect(await logCount(redis, key)).toBe(100);
      });

      it("counts concurrent checks on the caller's clock in full (workerd freezes Date.now())", async () => {
        const limiter = createLimiter({
          store: testStore(5_000),
          timeoutMs: 5_000,
          prefix,
          clock: "caller",
        });
        const decisions = await Promise.all(
          Array.from({ length: 300 }, () =>
            limiter.limit({
              policy: "frozen",
              key: "client",
              limit: 50,
              windowMs: 60_000,
              algorithm,
            }),
          ),
        );
        expect(count(decisions, (d) => d.allowed)).toBe(50);
      });
    });

    describe("the window slides (explicit clock)", () => {
      const store = testStore(5_000);
      let n = 0;
      const at = (key: string, now: number, cost = 1, limit = 3) =>
        evaluatePolicy(store, {
          redisKey: storageKey(prefix, "slide", key),
          algorithm,
          limit,
          windowMs: 1_000,
          cost,
          memberId: `s${n++}`,
          now,
        });

      it("frees capacity exactly when the oldest admission leaves, not before, not at a boundary", async () => {
        const t = 1_700_000_000_000;
        expect((await at("a", t)).allowed).toBe(true);
        expect((await at("a", t + 400)).allowed).toBe(true);
        const third = await at("a", t + 800);
        expect(third).toMatchObject({ allowed: true, remaining: 0, reset: t + 1_000 });

        const early = await at("a", t + 999);
        expect(early).toMatchObject({
          allowed: false,
          remaining: 0,
          reset: t + 1_000,
          retryAfterMs: 1,
        });

        // The first admission leaves at t + 1000: exactly one unit frees.
        expect((await at("a", t + 1_000)).allowed).toBe(true);
        const next = await at("a", t + 1_000);
        expect(next).toMatchObject({ allowed: false, reset: t + 1_400, retryAfterMs: 400 });
        // A fixed window would refill everything at t + 1000; the log frees the second unit at t + 1400.
        expect((await at("a", t + 1_399)).allowed).toBe(false);
        expect((await at("a", t + 1_400)).allowed).toBe(true);
      });

      it("a denied costly request consumes nothing; a smaller one that fits still passes", async () => {
        const t = 1_700_000_100_000;
        const key = storageKey(prefix, "slide", "cost");
        expect((await at("cost", t, 7, 10)).allowed).toBe(true);
        const denied = await at("cost", t + 1, 5, 10);
        expect(denied).toMatchObject({ allowed: false, remaining: 3 });
        // It must wait until 2 of the 7 leave: they all left at t + 1000.
        expect(denied.retryAfterMs).toBe(999);
        expect(await logCount(redis, key)).toBe(7);
        expect(await at("cost", t + 2, 3, 10)).toMatchObject({ allowed: true, remaining: 0 });
        expect(await logCount(redis, key)).toBe(10);
      });

      it("a cost of many units is admitted whole or not at all", async () => {
        const t = 1_700_000_200_000;
        const key = storageKey(prefix, "slide", "big");
        // The largest cost one call may write (MAX_ZSET_COST): several ZADD chunks in the script.
        expect((await at("big", t, 1_000, 1_500)).allowed).toBe(true);
        expect((await at("big", t, 1_000, 1_500)).allowed).toBe(false);
        expect(await logCount(redis, key)).toBe(1_000);
      });
    });
  });
}

describe("keys, TTLs and scripts", () => {
  it("sets a TTL covering the window, at most two (the ring renews it once per window), and writes nothing on a denial", async () => {
    const limiter = createLimiter({ store: testStore(5_000), timeoutMs: 5_000, prefix });
    const key = storageKey(prefix, "ttl", "client");
    await limiter.limit({ policy: "ttl", key: "client", limit: 1, windowMs: 30_000 });
    const ttl = await redis.pttl(key);
    expect(ttl).toBeGreaterThan(29_000);
    expect(ttl).toBeLessThanOrEqual(60_000);

    // A denial leaves the log as it was: the same bytes, and no TTL renewed.
    const stored = await redis.strlen(key);
    const denied = await limiter.limit({
      policy: "ttl",
      key: "client",
      limit: 1,
      windowMs: 30_000,
    });
    expect(denied.allowed).toBe(false);
    expect(await redis.strlen(key)).toBe(stored);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(ttl);

    // A cost past the limit is refused before the store is asked: no key is made for it.
    const fresh = storageKey(prefix, "ttl", "never-admitted");
    await expect(
      limiter.limit({ policy: "ttl", key: "never-admitted", limit: 1, windowMs: 30_000, cost: 2 }),
    ).rejects.toThrow(/cost/);
    expect(await redis.exists(fresh)).toBe(0);
  });

  it("keeps client keys that differ only in encoding-sensitive characters apart", async () => {
    const limiter = createLimiter({ store: testStore(5_000), timeoutMs: 5_000, prefix });
    const keys = ["a:b", "a%3Ab", "{a}b", "a}{b", "ключ ✓", ""];
    for (const key of keys.filter(Boolean)) {
      const d = await limiter.limit({ policy: "enc", key, limit: 1, windowMs: 60_000 });
      expect(d.allowed, key).toBe(true);
    }
    // Every key got its own log and one hash tag (no braces inside the tag).
    const stored = [];
    let cursor = "0";
    do {
      const [next, found] = await redis.scan(cursor, { match: `${prefix}:enc:*`, count: 1000 });
      cursor = String(next);
      stored.push(...found);
    } while (cursor !== "0");
    expect(stored).toHaveLength(5);
    for (const key of stored) expect(key.match(/[{}]/g)).toEqual(["{", "}"]);
  });

  it("recovers from SCRIPT FLUSH: NOSCRIPT falls back to EVAL once, which loads the script", async () => {
    const counted = counting(testStore(5_000));
    const limiter = createLimiter({ store: counted.store, prefix, denialCache: false });
    const limit = 25;
    const ask = () => limiter.limit({ policy: "flush", key: "client", limit, windowMs: 60_000 });
    expect((await ask()).allowed).toBe(true);
    let asked = 1;
    let fellBack = false;
    // The store is shared: another test's EVAL may load the script again between our flush and
    // our call, which then meets no NOSCRIPT. Flush again until one of ours does.
    for (let round = 0; round < 20 && !fellBack; round++) {
      await redis.scriptFlush();
      const evalsBefore = counted.evals();
      const afterFlush = await ask();
      asked++;
      expect(afterFlush).toMatchObject({
        allowed: true,
        remaining: limit - asked,
        source: "redis",
      });
      // Once at most: one NOSCRIPT, one EVAL.
      expect(counted.evals() - evalsBefore).toBeLessThanOrEqual(1);
      fellBack = counted.evals() - evalsBefore === 1;
    }
    expect(fellBack).toBe(true);
    // The EVAL loaded it: the SHA the runner sends is known again, so EVALSHA hits from now on.
    expect(await redis.scriptExists(await scriptSha(EVALUATE_SCRIPTS["sliding-log"]))).toEqual([1]);
    while (asked < limit) {
      expect(await ask()).toMatchObject({
        allowed: true,
        remaining: limit - ++asked,
        source: "redis",
      });
    }
    expect(await ask()).toMatchObject({ allowed: false, source: "redis" });
  });

  it("after SCRIPT FLUSH, 1000 concurrent decisions fall back to EVAL in a few shared HTTP requests", async () => {
    // Every EVALSHA gets NOSCRIPT at once; the EVALs (bounded by the time each decision has
    // left) must still share the client's auto-pipeline, not open a request each. Counted at
    // the network (a pass-through fault scenario), not timed: a busy machine stays green.
    const network = await faultScenario("forward");
    const limiter = createLimiter({
      // The auto-pipeline on, as createStoreClient's default (the worker turns it off: in
      // workerd two requests' decisions never share a tick, see autoPipeline).
      store: storeAt(network.url, 10_000, true),
      prefix,
      timeoutMs: 10_000,
      fallback: false,
    });
    await redis.scriptFlush();
    const decisions = await Promise.all(
      Array.from({ length: 1000 }, () =>
        limiter.limit({ policy: "flush-burst", key: "client", limit: 100, windowMs: 60_000 }),
      ),
    );
    expect(decisions.filter((d) => d.source !== "redis" && d.source !== "cache")).toEqual([]);
    // One pipeline of EVALSHAs and one of EVALs (4 requests measured here), not 2000.
    const { requests } = await network.stats();
    expect(requests).toBeLessThanOrEqual(10);
    expect(count(decisions, (d) => d.allowed)).toBe(100);
    expect(await logCount(redis, storageKey(prefix, "flush-burst", "client"))).toBe(100);
  });

  it("a denial on an existing log leaves its members and TTL as they were", async () => {
    const limiter = createLimiter({
      store: testStore(5_000),
      timeoutMs: 5_000,
      prefix,
      denialCache: false,
    });
    const key = storageKey(prefix, "ttl", "full");
    const ask = (cost = 1) =>
      limiter.limit({ policy: "ttl", key: "full", limit: 2, windowMs: 60_000, cost });
    expect((await ask()).allowed).toBe(true);
    const members = await readLog(redis, key);
    const ttl = await redis.pttl(key);
    expect((await ask(2)).allowed).toBe(false);
    expect(await readLog(redis, key)).toEqual(members);
    expect(await redis.pttl(key)).toBeLessThanOrEqual(ttl);
  });
});
