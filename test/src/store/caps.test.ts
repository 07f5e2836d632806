import { describe, expect, inject, it } from "vitest";
import { parseConfig, parseRules } from "../../../src/config/limiter-config";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { nextMemberId } from "../../../src/limiter/member-id";
import { MAX_LIMIT, MAX_RING_COST, MAX_ZSET_COST, MAX_ZSET_LIMIT } from "../../../src/store/caps";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { PolicyBoundsError } from "../../../src/store/script-inputs";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { postCheck, workerWith } from "../../support/worker/worker-harness";

// What one request may make Redis store and do (src/config/limits.ts, docs/check-api.md "Limits"): a
// sliding-log limit bounds a full key's memory, a call's summed log cost bounds the members one
// script writes (and so how long it blocks Redis). Past either: a 400 or a config error naming
// the field, and nothing written.
const redis = testRedis();
const store = testStore(30_000);
const prefix = scopedPrefix("caps");
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    rules: [
      {
        name: "log-a",
        limit: MAX_ZSET_LIMIT,
        window: "1m",
        cost: 1,
        algorithm: "sliding-log-zset",
      },
      { name: "log-b", limit: MAX_ZSET_LIMIT, window: "1m", algorithm: "sliding-log-zset" },
      { name: "counter", limit: MAX_LIMIT, window: "1m", algorithm: "fixed-window" },
    ],
  }),
});

async function expectRefused(body: Record<string, unknown>, field: string) {
  for (const path of ["/check", "/check/peek"] as const) {
    if (path === "/check/peek" && "rules" in body) continue;
    const res = await postCheck(worker, body, { path });
    expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
    expect(res.headers.get("Content-Type")).toContain("application/problem+json");
    const problem = await res.json<{ field: string; detail: string }>();
    expect(problem.field, JSON.stringify(body)).toBe(field);
  }
}

describe("caps on what one /check may make Redis store and do", () => {
  it("an ad-hoc sliding-log-zset limit past MAX_ZSET_LIMIT is a 400 naming limit; the ring and the O(1) algorithms keep MAX_LIMIT", async () => {
    await expectRefused(
      { key: "k1", limit: MAX_ZSET_LIMIT + 1, window: "1m", algorithm: "sliding-log-zset" },
      "limit",
    );
    await expectRefused({ key: "k1", limit: MAX_LIMIT + 1, window: "1m" }, "limit");
    await expectRefused(
      { key: "k1", limit: MAX_LIMIT + 1, window: "1m", algorithm: "token-bucket" },
      "limit",
    );
    // The documented 12 MB request, in a sorted set.
    await expectRefused(
      { key: "k1", limit: 100_000, cost: 100_000, window: "7d", algorithm: "sliding-log-zset" },
      "limit",
    );
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
    // In the ring (the default) the same request is 400 kB, written with one SET.
    const ring = await postCheck(worker, {
      key: "r1",
      limit: 100_000,
      cost: 100_000,
      window: "7d",
    });
    expect(ring.status).toBe(200);

    for (const algorithm of ["fixed-window", "sliding-counter", "token-bucket"]) {
      const res = await postCheck(worker, {
        key: "o1",
        limit: MAX_LIMIT,
        cost: MAX_LIMIT,
        window: "1m",
        algorithm,
      });
      expect(res.status, algorithm).toBe(200);
    }
  });

  it("a sliding-log-zset cost past MAX_ZSET_COST is a 400 naming cost, for ad-hoc checks and rules", async () => {
    const before = (await redis.keys(`${prefix}*`)).sort();
    await expectRefused(
      {
        key: "k2",
        limit: MAX_ZSET_LIMIT,
        cost: MAX_ZSET_COST + 1,
        window: "1m",
        algorithm: "sliding-log-zset",
      },
      "cost",
    );
    await expectRefused({ key: "k2", rule: "log-a", cost: MAX_ZSET_COST + 1 }, "cost");
    // Summed over the log rules one call decides: each alone fits, together they do not.
    const half = Math.floor(MAX_ZSET_COST / 2) + 1;
    await expectRefused({ key: "k2", rules: ["log-a", "log-b"], cost: half }, "cost");
    expect((await redis.keys(`${prefix}*`)).sort()).toEqual(before);

    // At the cap: admitted. An O(1) rule beside the logs does not count towards it.
    const atCap = await postCheck(worker, {
      key: "k3",
      limit: MAX_ZSET_LIMIT,
      cost: MAX_ZSET_COST,
      window: "1m",
      algorithm: "sliding-log-zset",
    });
    expect(atCap.status).toBe(200);
    const split = await postCheck(worker, {
      key: "k4",
      rules: ["log-a", "counter"],
      cost: MAX_ZSET_COST,
    });
    expect(split.status).toBe(200);
  });
});

describe("caps in LIMITER_CONFIG and rules given in code", () => {
  const rule = { name: "a", window: "1m", algorithm: "sliding-log-zset" };
  const cases: [label: string, rules: unknown[], field: string][] = [
    ["a log limit", [{ ...rule, limit: MAX_ZSET_LIMIT + 1 }], "rules[0].limit"],
    [
      "an O(1) limit",
      [{ ...rule, limit: MAX_LIMIT + 1, algorithm: "sliding-counter" }],
      "rules[0].limit",
    ],
    ["a log cost", [{ ...rule, limit: MAX_ZSET_LIMIT, cost: MAX_ZSET_COST + 1 }], "rules[0].cost"],
    [
      "log costs that add up past the cap (one request may match them all)",
      [
        { ...rule, limit: MAX_ZSET_LIMIT, cost: MAX_ZSET_COST },
        { ...rule, name: "b", limit: 10, cost: 1, algorithm: "token-bucket" },
        { ...rule, name: "r", limit: 10, cost: 1, algorithm: "sliding-log" },
        { ...rule, name: "c", limit: 10, cost: 1 },
      ],
      "rules[3].cost",
    ],
  ];
  for (const [label, rules, field] of cases) {
    it(`names ${field} for ${label}`, () => {
      for (const parsed of [parseConfig({ rules }), parseRules(rules)]) {
        expect(parsed.ok).toBe(false);
        expect(!parsed.ok && parsed.field).toBe(field);
      }
    });
  }

  it("takes every cap exactly", () => {
    const parsed = parseConfig({
      rules: [
        {
          name: "log",
          limit: MAX_ZSET_LIMIT,
          window: "7d",
          cost: MAX_ZSET_COST,
          algorithm: "sliding-log-zset",
        },
        { name: "ring", limit: MAX_LIMIT, window: "7d", cost: MAX_LIMIT },
        {
          name: "bucket",
          limit: MAX_LIMIT,
          window: "7d",
          cost: MAX_LIMIT,
          algorithm: "token-bucket",
        },
      ],
    });
    expect(parsed.ok, JSON.stringify(parsed)).toBe(true);
  });
});

describe("caps in the store layer (createLimiter, evaluate)", () => {
  it("evaluate refuses an over-cap policy before calling the store", async () => {
    const key = storageKey(prefix, "direct", "k5");
    const over = [
      {
        redisKey: key,
        algorithm: "sliding-log-zset" as const,
        limit: 100_000,
        windowMs: 604_800_000,
        cost: 100_000,
      },
      {
        redisKey: key,
        algorithm: "sliding-log-zset" as const,
        limit: MAX_ZSET_LIMIT + 1,
        windowMs: 60_000,
        cost: 1,
      },
      {
        redisKey: key,
        algorithm: "sliding-log-zset" as const,
        limit: MAX_ZSET_LIMIT,
        windowMs: 60_000,
        cost: MAX_ZSET_COST + 1,
      },
      {
        redisKey: key,
        algorithm: "fixed-window" as const,
        limit: MAX_LIMIT + 1,
        windowMs: 60_000,
        cost: 1,
      },
      {
        redisKey: key,
        algorithm: "sliding-log" as const,
        limit: MAX_LIMIT + 1,
        windowMs: 60_000,
        cost: 1,
      },
      { redisKey: key, algorithm: "fixed-window" as const, limit: 5, windowMs: 60_000, cost: -5 },
      {
        redisKey: key,
        algorithm: "sliding-log-zset" as const,
        limit: 5,
        windowMs: 60_000,
        cost: 1.5,
      },
      {
        redisKey: key,
        algorithm: "sliding-log-zset" as const,
        limit: 5,
        windowMs: 60_000,
        cost: 0,
      },
    ];
    for (const policy of over) {
      await expect(
        evaluatePolicy(store, { ...policy, memberId: nextMemberId() }),
        JSON.stringify(policy),
      ).rejects.toThrow(RangeError);
    }
    // Summed over one call's log policies.
    const half = Math.floor(MAX_ZSET_COST / 2) + 1;
    await expect(
      evaluate(store, {
        memberId: nextMemberId(),
        policies: ["x", "y"].map((p) => ({
          redisKey: storageKey(prefix, p, "k5"),
          algorithm: "sliding-log-zset" as const,
          limit: MAX_ZSET_LIMIT,
          windowMs: 60_000,
          cost: half,
        })),
      }),
    ).rejects.toThrow(RangeError);
    expect(await redis.keys(`${prefix}*k5*`)).toEqual([]);
    // The rings' writes, summed over one call (each cost counted up to its limit: a cost above it
    // writes nothing).
    const ring = (p: string, cost: number) => ({
      redisKey: storageKey(prefix, p, "k5"),
      algorithm: "sliding-log" as const,
      limit: MAX_LIMIT,
      windowMs: 60_000,
      cost,
    });
    await expect(
      evaluate(store, {
        memberId: nextMemberId(),
        policies: [ring("r1", MAX_RING_COST), ring("r2", 1)],
      }),
    ).rejects.toThrow(RangeError);
    expect(await redis.keys(`${prefix}*k5*`)).toEqual([]);
    const fits = await evaluate(store, {
      memberId: nextMemberId(),
      policies: [ring("r3", MAX_RING_COST / 2), ring("r4", MAX_RING_COST / 2)],
    });
    expect(fits.allowed).toBe(true);
  });

  it("a limiter refuses the 12 MB request as the caller's error: nothing written, the store stays in use", async () => {
    const limiter = createLimiter({ store, prefix, denialCache: false, fallback: false });
    const huge = {
      policy: "lib",
      key: "k6",
      limit: 100_000,
      windowMs: 604_800_000,
      cost: 100_000,
      algorithm: "sliding-log-zset" as const,
    };
    // More than the breaker's failure threshold (3): a caller's bad request is not a store failure.
    for (let i = 0; i < 5; i++) {
      await expect(limiter.limit(huge)).rejects.toThrow(PolicyBoundsError);
      await expect(
        limiter.limitAll([
          { ...huge, policy: "lib-a", limit: MAX_ZSET_LIMIT, cost: MAX_ZSET_COST },
          { ...huge, policy: "lib-b", limit: MAX_ZSET_LIMIT, cost: 1 },
        ]),
      ).rejects.toThrow(PolicyBoundsError);
    }
    expect(await redis.keys(`${prefix}*k6*`)).toEqual([]);
    const fine = await limiter.limit({ ...huge, limit: MAX_ZSET_LIMIT, cost: MAX_ZSET_COST });
    expect(fine).toMatchObject({ allowed: true, source: "redis" });
  });
});

describe("a sorted-set log full at MAX_ZSET_LIMIT", () => {
  it("stays within about 1 MB of Redis memory", async () => {
    const key = storageKey(prefix, "full", "203.0.113.7");
    const T = 1_700_000_000_000;
    for (let i = 0; i < MAX_ZSET_LIMIT / MAX_ZSET_COST; i++) {
      const result = await evaluatePolicy(store, {
        redisKey: key,
        algorithm: "sliding-log-zset",
        limit: MAX_ZSET_LIMIT,
        windowMs: 604_800_000,
        cost: MAX_ZSET_COST,
        memberId: nextMemberId(),
        now: T + i,
      });
      expect(result.allowed).toBe(true);
    }
    expect(await logCount(redis, key)).toBe(MAX_ZSET_LIMIT);
    // MEMORY USAGE is not in the client's API: one raw REST call to the bridge.
    const response = await fetch(inject("bridgeUrl"), {
      method: "POST",
      headers: { Authorization: `Bearer ${inject("bridgeToken")}` },
      body: JSON.stringify(["MEMORY", "USAGE", key, "SAMPLES", "0"]),
    });
    const { result: bytes } = await response.json<{ result: number }>();
    console.log(`sliding log full at ${MAX_ZSET_LIMIT}: ${bytes} bytes`);
    expect(bytes).toBeLessThanOrEqual(1024 * 1024);
  }, 60_000);
});
