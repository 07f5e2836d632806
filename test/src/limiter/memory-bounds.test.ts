import { describe, expect, inject, it } from "vitest";
import { DIGESTED_KEY_PREFIX, MAX_KEY_LENGTH } from "../../../src/bounded-key";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { createDenialCache } from "../../../src/limiter/denial-cache";
import { createFallbackLimiter } from "../../../src/limiter/fallback-limiter";
import { createLeaseKeys } from "../../../src/limiter/leases/isolate-lease-keys";
import { resolvePolicy, withStorageKeys } from "../../../src/limiter/resolved-policy";
import { createSingleFlight } from "../../../src/limiter/single-flight";
import { manualClock, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// Per-isolate memory is bounded in bytes, not only in entries: each structure counts what it
// holds (keys at 2 bytes a character plus a fixed cost per entry) and evicts past its budget,
// and drops what expired as it goes (no timers). workerd has no heap API: the real heap is
// measured in Node by test/src/limiter/isolate-memory.node.test.ts.

const MiB = 1024 * 1024;
const redis = testRedis();
const prefix = scopedPrefix("memory-bounds");
/** A distinct key of `length` characters, numbered `i`. */
const big = (i: number, length: number, fill = "k") =>
  `${String(i).padStart(8, "0")}${fill.repeat(length - 8)}`;

describe("client keys past MAX_KEY_LENGTH count under their digest", () => {
  const limiter = createLimiter({ store: testStore(2_000), prefix, timeoutMs: 2_000 });
  const request = (key: string) => ({ policy: "long", key, limit: 1, windowMs: 60_000 });

  it("a 100 kB key has its own bucket, under a 72-character digest in Redis", async () => {
    const one = big(1, 100_000);
    const other = big(2, 100_000);
    expect((await limiter.limit(request(one))).allowed).toBe(true);
    expect((await limiter.limit(request(one))).allowed).toBe(false);
    expect((await limiter.limit(request(other))).allowed).toBe(true);
    const keys = await redis.keys(`${prefix}:long:*`);
    expect(keys).toHaveLength(2);
    for (const key of keys) expect(key.length).toBeLessThan(prefix.length + 100);
  });

  it("keys up to the bound are stored as they are; a key spelling a digest is digested too", async () => {
    const exact = big(3, MAX_KEY_LENGTH);
    expect((await limiter.limit(request(exact))).allowed).toBe(true);
    expect(await redis.exists(`${prefix}:long:{${exact}}`)).toBe(1);
    // Whatever the digest of a long key is, a short key spelling it lands elsewhere.
    const spelled = `${DIGESTED_KEY_PREFIX}${"0".repeat(64)}`;
    expect((await limiter.limit(request(spelled))).allowed).toBe(true);
    expect(await redis.exists(`${prefix}:long:{${encodeURIComponent(spelled)}}`)).toBe(0);
  });

  it("two long keys differing only in a lone surrogate vs U+FFFD are two buckets", async () => {
    const base = big(4, 1_000);
    expect((await limiter.limit(request(`${base}\uD800`))).allowed).toBe(true);
    expect((await limiter.limit(request(`${base}\uFFFD`))).allowed).toBe(true);
  });

  it("a digested key is forgotten after a reset", async () => {
    const cache = createDenialCache();
    const forgetting = createLimiter({
      store: testStore(2_000),
      prefix,
      timeoutMs: 2_000,
      denialCache: cache,
    });
    const key = big(5, 10_000);
    await forgetting.limit(request(key));
    await forgetting.limit(request(key));
    expect(cache.size).toBe(1);
    forgetting.forget(request(key));
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(cache.size).toBe(0);
  });
});

describe("each structure stays within its byte budget", () => {
  it("the denial cache, driven with 20 000 keys of 512 characters", () => {
    const cache = createDenialCache();
    for (let i = 0; i < 20_000; i++) {
      cache.remember(big(i, 512), { minCost: 1, remaining: 0, until: 2e12 }, 0);
    }
    expect(cache.bytes).toBeLessThanOrEqual(4 * MiB);
    expect(cache.bytes).toBeGreaterThan(3 * MiB);
    expect(cache.size).toBeLessThan(10_000);
  });

  it("the denial cache keeps no entry bigger than its budget, and sweeps expired ones", () => {
    const cache = createDenialCache({ maxBytes: 64 * 1024 });
    cache.remember(big(0, 100_000), { minCost: 1, remaining: 0, until: 10 }, 0);
    expect(cache.size).toBe(0);
    expect(cache.bytes).toBe(0);
    for (let i = 0; i < 10; i++)
      cache.remember(`k${i}`, { minCost: 1, remaining: 0, until: 10 }, 0);
    // Each later write drops two expired entries from the old end.
    for (let i = 0; i < 5; i++)
      cache.remember(`late${i}`, { minCost: 1, remaining: 0, until: 99 }, 20);
    expect(cache.size).toBe(5);
  });

  it("the fallback's logs and reports, driven with 20 000 keys of 512 characters", () => {
    const fallback = createFallbackLimiter();
    for (let i = 0; i < 20_000; i++) {
      fallback.note(big(i, 512, "r"), 5, 60_000, 1_000);
      for (let j = 0; j < 3; j++) fallback.limit(big(i, 512, "l"), 10, 60_000, 1, 1_000 + j);
    }
    expect(fallback.bytes.logs).toBeLessThanOrEqual(4 * MiB);
    expect(fallback.bytes.reports).toBeLessThanOrEqual(4 * MiB);
    expect(fallback.keys).toBeLessThan(10_000);
    // Still deciding: the newest key's log is there.
    expect(fallback.peek(big(19_999, 512, "l"), 10, 60_000, 1, 1_003).remaining).toBe(6);
  });

  it("the fallback drops logs that emptied and reports that expired as new keys come", () => {
    const fallback = createFallbackLimiter();
    for (let i = 0; i < 100; i++) {
      fallback.limit(`old${i}`, 10, 1_000, 1, 0);
      fallback.note(`old${i}`, 5, 1_000, 0);
    }
    // Everything above left its window at 1 000: each new key sweeps up to two of it.
    for (let i = 0; i < 50; i++) {
      fallback.limit(`new${i}`, 10, 1_000, 1, 5_000);
      fallback.note(`new${i}`, 5, 1_000, 5_000);
    }
    expect(fallback.keys).toBe(50);
    expect(fallback.entries).toBe(50);
    const reportsOfFifty = fallback.bytes.reports;
    fallback.unnote("new0");
    expect(fallback.bytes.reports).toBeLessThan(reportsOfFifty);
  });

  it("single flight: 20 000 leaders that never settle stay within 2 MiB, and expire unasked", () => {
    const clock = manualClock();
    const flights = createSingleFlight({ timeoutMs: 500, now: clock.now });
    for (let i = 0; i < 20_000; i++) flights.lead(big(i, 512), new Promise(() => {}));
    expect(flights.bytes).toBeLessThanOrEqual(2 * MiB);
    expect(flights.size).toBeLessThan(10_000);
    // Past the deadline, the next flight of any key sweeps every lost one.
    clock.advance(500);
    flights.lead("other", new Promise(() => {}));
    expect(flights.size).toBe(1);
    clock.advance(500);
    expect(flights.follow("unrelated")).toBeUndefined();
    expect(flights.size).toBe(0);
    expect(flights.bytes).toBe(0);
  });

  it("lease state: 20 000 keys of 512 two-byte characters, their Redis keys built, within 8 MiB", () => {
    let evicted = 0;
    const keys = createLeaseKeys(10_000, () => evicted++);
    for (let i = 0; i < 20_000; i++) {
      const policy = resolvePolicy(
        { policy: "api", key: big(i, 512, "\u4e2d"), limit: 100, windowMs: 60_000, lease: true },
        "open",
      );
      withStorageKeys([policy], prefix);
      const state = keys.stateOf(policy.cacheKey, 0);
      state.policy = policy;
      keys.account(policy.cacheKey);
    }
    expect(keys.bytes).toBeLessThanOrEqual(8 * MiB);
    expect(evicted).toBeGreaterThan(10_000);
    const left = [...keys.values()].length;
    keys.delete([...keys.values()][0]?.policy?.cacheKey ?? "");
    expect([...keys.values()].length).toBe(left - 1);
  });
});

describe("the limiter's structures under long keys, end to end", () => {
  it("the fallback holds digests: 200 keys of 64 kB during an outage stay far under a megabyte", async () => {
    const fallback = createFallbackLimiter();
    // A store that refuses connections: every call fails, the fallback decides.
    const limiter = createLimiter({
      store: storeAt(inject("refusedUrl"), 200),
      prefix,
      timeoutMs: 200,
      fallback: { limiter: fallback },
    });
    for (let i = 0; i < 200; i++) {
      await limiter.limit({ policy: "outage", key: big(i, 65_536), limit: 5, windowMs: 60_000 });
    }
    expect(fallback.keys).toBeGreaterThan(0);
    expect(fallback.bytes.logs).toBeLessThan(200 * 1_000);
  });
});
