import { describe, expect, inject, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { createFallbackLimiter } from "../../../src/limiter/fallback-limiter";
import type { LimiterOptions } from "../../../src/limiter/limiter-options";
import type { LimitRequest } from "../../../src/limiter/types";
import type { Algorithm } from "../../../src/store/algorithm";
import { storageKey } from "../../../src/store/keys";
import { counting, faultScenario, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("limit-all");

/** A limiter on the real bridge, counting its store calls. */
function limiterOn(url = inject("bridgeUrl"), extra: Partial<LimiterOptions> = {}) {
  const counted = counting(storeAt(url, 2_000));
  const limiter = createLimiter({ store: counted.store, prefix, timeoutMs: 2_000, ...extra });
  return { limiter, calls: counted.calls };
}

const policy = (
  name: string,
  key: string,
  limit: number,
  algorithm: Algorithm = "sliding-log",
  extra: Partial<LimitRequest> = {},
): LimitRequest => ({ policy: name, key, limit, windowMs: 60_000, algorithm, ...extra });

describe("limitAll: several policies in one store call", () => {
  it("one store call decides all; a denial consumes nothing in the others and names the denier", async () => {
    // No denial cache: the store decides the denial too.
    const { limiter, calls } = limiterOn(undefined, { denialCache: false });
    const key = `k-${crypto.randomUUID()}`;
    const both = [policy("la-wide", key, 5), policy("la-tight", key, 2, "token-bucket")];
    // (The first call may add an EVAL after NOSCRIPT: count from the second.)
    let start = 0;
    for (let i = 0; i < 2; i++) {
      const ok = await limiter.limitAll(both);
      if (i === 0) start = calls();
      expect(ok).toMatchObject({ allowed: true, replayed: false });
      expect(ok.decisions.map((d) => [d.policy, d.algorithm, d.source])).toEqual([
        ["la-wide", "sliding-log", "redis"],
        ["la-tight", "token-bucket", "redis"],
      ]);
      expect(ok.receipt?.policies).toEqual(["la-wide", "la-tight"]);
    }
    expect(calls() - start).toBe(1);
    const denied = await limiter.limitAll(both);
    expect(denied).toMatchObject({ allowed: false, deniedBy: "la-tight", replayed: false });
    expect(denied.receipt).toBeUndefined();
    // The wide policy alone admits, and reports its remaining without this request's cost.
    expect(denied.decisions[0]).toMatchObject({ allowed: true, remaining: 3, source: "redis" });
    expect(denied.decisions[1]).toMatchObject({ allowed: false, remaining: 0 });
    expect(await logCount(redis, storageKey(prefix, "la-wide", key))).toBe(2);
    expect(calls() - start).toBe(2);
  });

  it("a cached denial of one policy denies the request with no store call; the others say not asked", async () => {
    const { limiter, calls } = limiterOn();
    const key = `k-${crypto.randomUUID()}`;
    const tight = policy("lc-tight", key, 1, "fixed-window");
    const wide = policy("lc-wide", key, 10);
    expect((await limiter.limitAll([tight, wide])).allowed).toBe(true);
    const first = await limiter.limitAll([tight, wide]);
    expect(first).toMatchObject({ allowed: false, deniedBy: "lc-tight" });
    const before = calls();
    const cached = await limiter.limitAll([wide, tight]);
    expect(calls()).toBe(before);
    expect(cached).toMatchObject({ allowed: false, deniedBy: "lc-tight", replayed: false });
    expect(cached.decisions[0]).toMatchObject({
      policy: "lc-wide",
      allowed: true,
      remaining: 10,
      resetAfterMs: 0,
      source: "cache",
    });
    expect(cached.decisions[1]).toMatchObject({
      policy: "lc-tight",
      allowed: false,
      source: "cache",
    });
    // The wide log holds the one admitted request only.
    expect(await logCount(redis, storageKey(prefix, "lc-wide", key))).toBe(1);
  });

  it("a request id is counted once, its retry replayed past the denial cache; replays are not cached", async () => {
    const { limiter, calls } = limiterOn();
    const key = `k-${crypto.randomUUID()}`;
    const one = [policy("lr-one", key, 1)];
    const first = await limiter.limitAll(one, { requestId: "r-1" });
    expect(first).toMatchObject({ allowed: true, replayed: false });
    // The key is now exhausted in this isolate's cache: a new request is denied from memory...
    const before = calls();
    expect((await limiter.limitAll(one)).decisions[0]?.source).toBe("cache");
    expect(calls()).toBe(before);
    // ...but a retry of r-1 gets its original answer from the store.
    const again = await limiter.limitAll(one, { requestId: "r-1" });
    expect(again).toMatchObject({ allowed: true, replayed: true });
    expect(again.receipt).toBeUndefined();
    expect(await logCount(redis, storageKey(prefix, "lr-one", key))).toBe(1);

    // A replayed denial proves nothing now: it is not remembered.
    const key2 = `k-${crypto.randomUUID()}`;
    const p = [policy("lr-two", key2, 1)];
    const { limiter: other } = limiterOn(undefined, { denialCache: false });
    await other.limitAll(p, { requestId: "a" });
    expect((await other.limitAll(p, { requestId: "b" })).allowed).toBe(false);
    const { limiter: fresh } = limiterOn();
    expect(await fresh.limitAll(p, { requestId: "b" })).toMatchObject({
      allowed: false,
      replayed: true,
    });
    await redis.del(storageKey(prefix, "lr-two", key2));
    expect(await fresh.limitAll(p)).toMatchObject({ allowed: true, replayed: false });
  });

  it("refund gives back exactly the log's units and drops this isolate's cached denial", async () => {
    const { limiter, calls } = limiterOn();
    const key = `k-${crypto.randomUUID()}`;
    const p = [policy("lf-log", key, 2), policy("lf-bucket", key, 2, "token-bucket")];
    await limiter.limitAll(p);
    const second = await limiter.limitAll(p);
    expect(second.allowed).toBe(true);
    // Exhausted: the next request is denied from the cache, without a store call.
    const before = calls();
    expect((await limiter.limitAll(p)).decisions[0]?.source).toBe("cache");
    expect(calls()).toBe(before);
    const back = await limiter.refund(second.receipt as NonNullable<typeof second.receipt>);
    expect(back).toEqual({ refunded: true, units: [1, 1] });
    expect(await logCount(redis, storageKey(prefix, "lf-log", key))).toBe(1);
    // The cache no longer denies: the store is asked, and admits.
    const after = await limiter.limitAll(p);
    expect(after).toMatchObject({ allowed: true });
    expect(after.decisions.every((d) => d.source === "redis")).toBe(true);
  });

  it("refund of some policies only; forget() drops a cached denial", async () => {
    const { limiter } = limiterOn();
    const key = `k-${crypto.randomUUID()}`;
    const p = [policy("lp-a", key, 1), policy("lp-b", key, 5)];
    const ok = await limiter.limitAll(p, { requestId: "partial" });
    const back = await limiter.refund(ok.receipt as NonNullable<typeof ok.receipt>, {
      policies: ["lp-a"],
    });
    expect(back).toEqual({ refunded: true, units: [1] });
    expect(await logCount(redis, storageKey(prefix, "lp-a", key))).toBe(0);
    expect(await logCount(redis, storageKey(prefix, "lp-b", key))).toBe(1);

    const single = policy("lp-single", key, 1, "sliding-counter");
    expect(await limiter.limit(single)).toMatchObject({ allowed: true, source: "redis" });
    expect(await limiter.limit(single)).toMatchObject({ allowed: false, source: "cache" });
    await redis.del(storageKey(prefix, "lp-single", key, "sliding-counter"));
    limiter.forget(single);
    expect(await limiter.limit(single)).toMatchObject({ allowed: true, source: "redis" });
  });

  it("a denial the store decided before a concurrent refund is not cached past the refund", async () => {
    const { limiter } = limiterOn();
    const key = `k-${crypto.randomUUID()}`;
    const p = policy("lr-race", key, 2);
    const first = await limiter.limitAll([p]);
    expect(first.allowed).toBe(true);
    // Sent before the refund (one auto-pipeline, in order): the store still holds the first
    // request, so a cost of 2 is denied, and that answer arrives around the refund's.
    const [racing, back] = await Promise.all([
      limiter.limit({ ...p, cost: 2 }),
      limiter.refund(first.receipt as NonNullable<typeof first.receipt>),
    ]);
    expect(racing).toMatchObject({ allowed: false, source: "redis" });
    expect(back).toEqual({ refunded: true, units: [1] });
    // The log is empty now: the store admits a cost of 2, so the cache must not deny it.
    expect(await logCount(redis, storageKey(prefix, "lr-race", key))).toBe(0);
    expect(await limiter.limit({ ...p, cost: 2 })).toMatchObject({
      allowed: true,
      source: "redis",
    });
  });
});

describe("limitAll when the store is down: still all or nothing", () => {
  it("the fallback checks every policy before it consumes in any", async () => {
    const store = await faultScenario("error-500");
    const local = createFallbackLimiter();
    const { limiter } = limiterOn(store.url, {
      timeoutMs: 200,
      fallback: { limiter: local },
      breaker: { failureThreshold: 1_000 },
    });
    const a = policy("fb-a", "k", 3);
    const b = policy("fb-b", "k", 1);
    const first = await limiter.limitAll([a, b]);
    expect(first).toMatchObject({ allowed: true });
    expect(first.decisions.map((d) => d.source)).toEqual(["fallback", "fallback"]);
    // b is full: the request is denied, and a consumes nothing.
    for (let i = 0; i < 5; i++) {
      const denied = await limiter.limitAll([a, b]);
      expect(denied).toMatchObject({ allowed: false, deniedBy: "fb-b" });
      expect(denied.decisions[0]).toMatchObject({ allowed: true, remaining: 1 });
    }
    // a alone still has exactly 2 left.
    expect(await limiter.limit(a)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await limiter.limit(a)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await limiter.limit(a)).allowed).toBe(false);
    expect(local.entries).toBe(4);
  });

  it("one fail-closed policy denies the request; the others consume nothing", async () => {
    const store = await faultScenario("error-500");
    const local = createFallbackLimiter();
    const { limiter } = limiterOn(store.url, { timeoutMs: 200, fallback: { limiter: local } });
    const open = policy("fc-open", "k", 3);
    const closed = policy("fc-closed", "k", 3, "sliding-log", { failMode: "closed" });
    const result = await limiter.limitAll([open, closed]);
    expect(result).toMatchObject({ allowed: false, deniedBy: "fc-closed" });
    expect(result.decisions.map((d) => [d.source, d.allowed])).toEqual([
      ["fallback", true],
      ["fail-closed", false],
    ]);
    expect(local.entries).toBe(0);
    // Without a fallback: fail open for the open policy, nothing consumed; still denied.
    const { limiter: bare } = limiterOn(store.url, { timeoutMs: 200, fallback: false });
    const bareResult = await bare.limitAll([open, closed]);
    expect(bareResult.allowed).toBe(false);
    expect(bareResult.decisions[0]).toMatchObject({
      source: "fail-open",
      allowed: true,
      remaining: 3,
    });
    // All open, no fallback: admitted.
    expect((await bare.limitAll([open, policy("fc-other", "k", 1)])).allowed).toBe(true);
  });
});
