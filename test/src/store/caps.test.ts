import { describe, expect, it } from "vitest";
import { parseConfig, parseRules } from "../../../src/config/limiter-config";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { nextMemberId } from "../../../src/limiter/member-id";
import type { Algorithm } from "../../../src/store/algorithm";
import { MAX_LIMIT, MAX_RING_COST } from "../../../src/store/caps";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { PolicyBoundsError } from "../../../src/store/script-inputs";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { workerWith } from "../../support/worker/worker-harness";

// What one request may make Redis store and do (src/config/limits.ts, docs/check-api.md "Limits"): a
// limit bounds a full key's memory, a call's summed ring cost bounds the bytes one script writes
// (and so how long it blocks Redis). Past either: a 400 or a config error naming the field, and
// nothing written. The retired sorted-set layout is refused the same way, naming its replacement.
const redis = testRedis();
const store = testStore(30_000);
const prefix = scopedPrefix("caps");
const TOKEN = "test-limiter-token";
const RETIRED = "sliding-log-zset";
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    rules: [
      { name: "log-a", limit: MAX_LIMIT, window: "1m", cost: 1 },
      { name: "log-b", limit: MAX_LIMIT, window: "1m" },
      { name: "counter", limit: MAX_LIMIT, window: "1m", algorithm: "fixed-window" },
    ],
  }),
});

function check(body: unknown, path = "/check") {
  return worker(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify(body),
  });
}

async function expectRefused(body: Record<string, unknown>, field: string): Promise<string> {
  let detail = "";
  for (const path of ["/check", "/check/peek"]) {
    if (path === "/check/peek" && "rules" in body) continue;
    const res = await check(body, path);
    expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
    expect(res.headers.get("Content-Type")).toContain("application/problem+json");
    const problem = await res.json<{ field: string; detail: string }>();
    expect(problem.field, JSON.stringify(body)).toBe(field);
    detail = problem.detail;
  }
  return detail;
}

describe("caps on what one /check may make Redis store and do", () => {
  it("a limit past MAX_LIMIT is a 400 naming limit, the ring's and the O(1) algorithms'", async () => {
    await expectRefused({ key: "k1", limit: MAX_LIMIT + 1, window: "1m" }, "limit");
    await expectRefused(
      { key: "k1", limit: MAX_LIMIT + 1, window: "1m", algorithm: "token-bucket" },
      "limit",
    );
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
    // A full ring at the cap is 400 kB, written with one SET.
    const ring = await check({ key: "r1", limit: MAX_LIMIT, cost: MAX_LIMIT, window: "7d" });
    expect(ring.status).toBe(200);

    for (const algorithm of ["fixed-window", "sliding-counter", "token-bucket"]) {
      const res = await check({
        key: "o1",
        limit: MAX_LIMIT,
        cost: MAX_LIMIT,
        window: "1m",
        algorithm,
      });
      expect(res.status, algorithm).toBe(200);
    }
  });

  it("ring costs summed past MAX_RING_COST are a 400 naming cost; an O(1) rule beside them does not count", async () => {
    const before = (await redis.keys(`${prefix}*`)).sort();
    // Each alone fits, together they do not.
    const half = MAX_RING_COST / 2 + 1;
    await expectRefused({ key: "k2", rules: ["log-a", "log-b"], cost: half }, "cost");
    expect((await redis.keys(`${prefix}*`)).sort()).toEqual(before);
    const split = await check({ key: "k4", rules: ["log-a", "counter"], cost: MAX_RING_COST });
    expect(split.status).toBe(200);
  });

  it("the retired sorted-set layout is a 400 naming algorithm, and what replaced it", async () => {
    const before = (await redis.keys(`${prefix}*`)).sort();
    const detail = await expectRefused(
      { key: "k7", limit: 10, window: "1m", algorithm: RETIRED },
      "algorithm",
    );
    expect(detail).toContain("retired");
    expect(detail).toContain('use "sliding-log"');
    expect((await redis.keys(`${prefix}*`)).sort()).toEqual(before);
  });
});

describe("caps in LIMITER_CONFIG and rules given in code", () => {
  const rule = { name: "a", window: "1m" };
  const cases: [label: string, rules: unknown[], field: string][] = [
    ["a log limit", [{ ...rule, limit: MAX_LIMIT + 1 }], "rules[0].limit"],
    [
      "an O(1) limit",
      [{ ...rule, limit: MAX_LIMIT + 1, algorithm: "sliding-counter" }],
      "rules[0].limit",
    ],
    ["a log cost above its limit", [{ ...rule, limit: 10, cost: 11 }], "rules[0].cost"],
    [
      "ring costs that add up past the cap (one request may match them all)",
      [
        { ...rule, limit: MAX_LIMIT, cost: MAX_RING_COST },
        { ...rule, name: "b", limit: 10, cost: 1, algorithm: "token-bucket" },
        { ...rule, name: "r", limit: 10, cost: 1, algorithm: "sliding-log" },
      ],
      "rules[2].cost",
    ],
    [
      "the retired sorted-set layout",
      [{ ...rule, limit: 10, algorithm: RETIRED }],
      "rules[0].algorithm",
    ],
  ];
  for (const [label, rules, field] of cases) {
    it(`names ${field} for ${label}`, () => {
      for (const parsed of [parseConfig({ rules }), parseRules(rules)]) {
        expect(parsed.ok).toBe(false);
        expect(!parsed.ok && parsed.field).toBe(field);
        if (field.endsWith("algorithm")) {
          expect(!parsed.ok && parsed.detail).toContain('was retired in 0.x: use "sliding-log"');
        }
      }
    });
  }

  it("takes every cap exactly", () => {
    const parsed = parseConfig({
      rules: [
        { name: "ring", limit: MAX_LIMIT, window: "7d", cost: MAX_RING_COST },
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
      { redisKey: key, algorithm: "sliding-log" as const, limit: 5, windowMs: 60_000, cost: 1.5 },
      { redisKey: key, algorithm: "sliding-log" as const, limit: 5, windowMs: 60_000, cost: 0 },
    ];
    for (const policy of over) {
      await expect(
        evaluatePolicy(store, { ...policy, memberId: nextMemberId() }),
        JSON.stringify(policy),
      ).rejects.toThrow(RangeError);
    }
    // A caller in plain JS naming the retired layout: told what replaced it.
    const retired = { redisKey: key, algorithm: RETIRED as Algorithm, limit: 5, windowMs: 60_000 };
    await expect(
      evaluatePolicy(store, { ...retired, cost: 1, memberId: nextMemberId() }),
    ).rejects.toThrow(/algorithm "sliding-log-zset" was retired in 0\.x: use "sliding-log"/);
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

  it("a limiter refuses an over-cap request as the caller's error: nothing written, the store stays in use", async () => {
    const limiter = createLimiter({ store, prefix, denialCache: false, fallback: false });
    const huge = { policy: "lib", key: "k6", limit: MAX_LIMIT, windowMs: 604_800_000, cost: 1 };
    // More than the breaker's failure threshold (3): a caller's bad request is not a store failure.
    for (let i = 0; i < 5; i++) {
      await expect(limiter.limit({ ...huge, algorithm: RETIRED as Algorithm })).rejects.toThrow(
        PolicyBoundsError,
      );
      await expect(
        limiter.limitAll([
          { ...huge, policy: "lib-a", cost: MAX_RING_COST },
          { ...huge, policy: "lib-b", cost: 1 },
        ]),
      ).rejects.toThrow(PolicyBoundsError);
    }
    expect(await redis.keys(`${prefix}*k6*`)).toEqual([]);
    const fine = await limiter.limit({ ...huge, cost: MAX_RING_COST });
    expect(fine).toMatchObject({ allowed: true, source: "redis" });
  });
});
