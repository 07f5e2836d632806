import { describe, expect, it } from "vitest";
import type { Algorithm } from "../../../src/store/algorithm";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("multi-rule");
/** Three clients, like three isolates. */
const stores = [0, 1, 2].map(() => testStore());
const store = stores[0] as (typeof stores)[number];

function spec(
  name: string,
  algorithm: Algorithm,
  limit: number,
  windowMs: number,
  cost = 1,
  client = "client",
): StorePolicy {
  return { redisKey: storageKey(prefix, name, client), algorithm, limit, windowMs, cost };
}

describe("several policies, all or nothing", () => {
  it("500 concurrent requests against {10 per second, 25 per hour}: each log holds exactly what was admitted", async () => {
    const perSecond = spec("ps", "sliding-log", 10, 1_000);
    const perHour = spec("ph", "sliding-log", 25, 3_600_000, 2);
    const results = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        evaluate(stores[i % 3] ?? store, {
          policies: [perSecond, perHour],
          memberId: `c${i}`,
          // One instant for all (the caller's clock): no request may slip into a new second.
          now: T,
        }),
      ),
    );
    const admitted = results.filter((r) => r.allowed);
    expect(admitted).toHaveLength(10);
    // Not 25 (perHour alone would admit 12 at cost 2): denials by perSecond consumed nothing.
    expect(await logCount(redis, perSecond.redisKey)).toBe(10);
    expect(await logCount(redis, perHour.redisKey)).toBe(20);
    for (const r of results.filter((r) => !r.allowed)) {
      expect(r.deniedBy).toBe(0);
      expect(r.policies[0]?.allowed).toBe(false);
      expect(r.policies[1]).toMatchObject({ allowed: true, remaining: 5 });
    }
  });

  it("the tighter policy binds when it comes second, and its denials cost the first nothing", async () => {
    const wide = spec("wide", "sliding-log", 100, 60_000);
    const tight = spec("tight", "sliding-log", 60, 60_000, 2);
    const results = await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        evaluate(stores[i % 3] ?? store, { policies: [wide, tight], memberId: `t${i}`, now: T }),
      ),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(30);
    expect(await logCount(redis, wide.redisKey)).toBe(30);
    expect(await logCount(redis, tight.redisKey)).toBe(60);
    expect(results.filter((r) => !r.allowed).every((r) => r.deniedBy === 1)).toBe(true);
  });

  it("mixes algorithms in one call, exact in every policy under concurrency", async () => {
    const log = spec("mix-log", "sliding-log", 100, 60_000);
    const fixed = spec("mix-fixed", "fixed-window", 100, 60_000);
    const counter = spec("mix-counter", "sliding-counter", 100, 60_000);
    const bucket = spec("mix-bucket", "token-bucket", 40, 60_000);
    const policies = [log, fixed, counter, bucket];
    const results = await Promise.all(
      Array.from({ length: 400 }, (_, i) =>
        evaluate(stores[i % 3] ?? store, { policies, memberId: `x${i}`, now: T + 10 }),
      ),
    );
    expect(results.filter((r) => r.allowed)).toHaveLength(40);
    expect(await logCount(redis, log.redisKey)).toBe(40);
    expect(await redis.get<string>(fixed.redisKey)).toBe(`${T + 10}:60000:40`);
    expect(await redis.get<string>(counter.redisKey)).toBe(`${T + 10}:60000:40:0`);
    // Each policy, asked alone at the same instant, has exactly limit − 40 left.
    for (const policy of policies) {
      const alone = await evaluatePolicy(store, {
        ...policy,
        cost: 1,
        memberId: "probe",
        now: T + 10,
      });
      expect(alone.allowed, policy.algorithm).toBe(policy.limit > 40);
      expect(alone.remaining, policy.algorithm).toBe(Math.max(0, policy.limit - 41));
    }
  });

  it("reports every policy, the binding denial, and the longest wait", async () => {
    const a = spec("report-a", "fixed-window", 5, 10_000);
    const b = spec("report-b", "sliding-log", 2, 1_000);
    const c = spec("report-c", "token-bucket", 3, 3_000);
    const policies = [a, b, c];
    const at = (now: number, costs: [number, number, number]) =>
      evaluate(store, {
        policies: policies.map((p, i) => ({ ...p, cost: costs[i] ?? 1 })),
        memberId: `r${now}-${costs.join("")}`,
        now,
      });
    expect(await at(T, [2, 2, 2])).toMatchObject({
      allowed: true,
      deniedBy: undefined,
      retryAfterMs: 0,
      policies: [
        { allowed: true, remaining: 3, reset: T + 10_000 },
        { allowed: true, remaining: 0, reset: T + 1_000 },
        // The bucket's next token arrives after 3000/3 ms.
        { allowed: true, remaining: 1, reset: T + 1_000 },
      ],
    });
    // b (log, full until T + 1000) and c (bucket: 1.5 tokens, 2 at T + 1000) deny; a allows.
    // On a tie the first denying policy is named.
    const denied = await at(T + 500, [2, 2, 2]);
    expect(denied.allowed).toBe(false);
    expect(denied.policies.map((p) => p.allowed)).toEqual([true, false, false]);
    expect(denied.policies[0]).toMatchObject({ remaining: 3, retryAfterMs: 0 });
    expect(denied.policies[2]).toMatchObject({ remaining: 1, retryAfterMs: 500 });
    expect(denied).toMatchObject({ deniedBy: 1, retryAfterMs: 500 });
    // With 3 tokens asked, the bucket waits longest (full at T + 2000): it is the one named.
    const costly = await at(T + 500, [1, 1, 3]);
    expect(costly).toMatchObject({ allowed: false, deniedBy: 2, retryAfterMs: 1_500 });
    expect((await at(T + 1_999, [1, 1, 3])).allowed).toBe(false);
    // After the longest wait the whole request passes; nothing was consumed by the denials.
    expect(await at(T + 2_000, [1, 1, 3])).toMatchObject({
      allowed: true,
      policies: [{ remaining: 2 }, { remaining: 1 }, { remaining: 0 }],
    });
  });
});
