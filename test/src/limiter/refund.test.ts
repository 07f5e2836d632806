import { describe, expect, it } from "vitest";
import type { Algorithm } from "../../../src/store/algorithm";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { refund } from "../../../src/store/refund";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { LOG_LAYOUTS, logCount, readLog } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("refund");
const store = testStore(10_000);

const spec = (name: string, algorithm: Algorithm, limit: number, cost: number): StorePolicy => ({
  redisKey: storageKey(prefix, name, "client"),
  algorithm,
  limit,
  windowMs: 1_000,
  cost,
});

describe("refund", () => {
  for (const layout of LOG_LAYOUTS) {
    it(`${layout}: removes exactly the request's admissions, once, and the capacity is back at once`, async () => {
      const policy = spec(`log-${layout}`, layout, 10, 2);
      for (const [memberId, now] of [
        ["m1", T],
        ["m2", T + 100],
        ["m3", T + 200],
      ] as const) {
        expect((await evaluatePolicy(store, { ...policy, memberId, now })).allowed).toBe(true);
      }
      const back = await refund(store, {
        policies: [policy],
        memberId: "m2",
        at: T + 100,
        now: T + 100,
      });
      expect(back).toEqual({ refunded: true, units: [2] });
      expect((await readLog(redis, policy.redisKey)).times).toEqual([T, T, T + 200, T + 200]);
      // Exact: a second refund of the same request gives back nothing.
      expect(
        await refund(store, { policies: [policy], memberId: "m2", at: T + 100, now: T + 100 }),
      ).toEqual({
        refunded: true,
        units: [0],
      });
      // The 2 units are back now, not when the refunded admissions would have left the window.
      expect(
        await evaluatePolicy(store, { ...policy, cost: 6, memberId: "m4", now: T + 300 }),
      ).toMatchObject({ allowed: true, remaining: 0 });
      expect(
        await evaluatePolicy(store, { ...policy, cost: 1, memberId: "m5", now: T + 301 }),
      ).toMatchObject({ allowed: false, retryAfterMs: 699 });
    });
  }

  it("fixed-window: gives the cost back to the window it was counted in, not to a later one", async () => {
    const policy = spec("fixed", "fixed-window", 10, 6);
    expect((await evaluatePolicy(store, { ...policy, memberId: "a", now: T + 10 })).allowed).toBe(
      true,
    );
    expect(
      await refund(store, { policies: [policy], memberId: "a", at: T + 10, now: T + 10 }),
    ).toMatchObject({
      units: [6],
    });
    expect(
      await evaluatePolicy(store, { ...policy, cost: 10, memberId: "b", now: T + 20 }),
    ).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    // A request of the previous window: its window no longer counts, nothing to give back.
    expect(
      await refund(store, { policies: [policy], memberId: "old", at: T - 10, now: T - 10 }),
    ).toMatchObject({
      units: [0],
    });
    expect(
      (await evaluatePolicy(store, { ...policy, cost: 1, memberId: "c", now: T + 30 })).allowed,
    ).toBe(false);
  });

  it("sliding-counter: refunds the current window's count, or the previous window's weight", async () => {
    const policy = spec("counter", "sliding-counter", 10, 6);
    expect((await evaluatePolicy(store, { ...policy, memberId: "a", now: T + 100 })).allowed).toBe(
      true,
    );
    // Half-way through the next window the 6 weigh 3.
    expect(
      await evaluatePolicy(store, { ...policy, cost: 1, memberId: "p", now: T + 1_500 }),
    ).toMatchObject({
      allowed: true,
      remaining: 6,
    });
    expect(
      await refund(store, { policies: [policy], memberId: "a", at: T + 100, now: T + 1_500 }),
    ).toMatchObject({ units: [6] });
    expect(
      await evaluatePolicy(store, { ...policy, cost: 9, memberId: "b", now: T + 1_500 }),
    ).toMatchObject({
      allowed: true,
      remaining: 0,
    });
  });

  it("token-bucket: a refund just after the admission reports every unit it gave back", async () => {
    // 10 tokens per second: 3 ms after taking 2, the bucket lacks 1.97 tokens. The refund makes
    // it full again (2 tokens' worth), so it gave back 2 units, not floor(1.97) = 1.
    const policy = spec("bucket-soon", "token-bucket", 10, 2);
    expect((await evaluatePolicy(store, { ...policy, memberId: "a", now: T })).allowed).toBe(true);
    const back = await refund(store, { policies: [policy], memberId: "a", at: T, now: T + 3 });
    expect(back).toEqual({ refunded: true, units: [2] });
    expect(await redis.exists(policy.redisKey)).toBe(0);
  });

  it("token-bucket: puts the tokens back, never more than full", async () => {
    const policy = spec("bucket", "token-bucket", 10, 4);
    expect(
      await evaluatePolicy(store, { ...policy, cost: 10, memberId: "all", now: T }),
    ).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect(await refund(store, { policies: [policy], memberId: "x", at: T, now: T })).toMatchObject(
      {
        units: [4],
      },
    );
    expect(await evaluatePolicy(store, { ...policy, memberId: "y", now: T })).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect(
      (await evaluatePolicy(store, { ...policy, cost: 1, memberId: "z", now: T })).allowed,
    ).toBe(false);
    // Refunds beyond full are clipped: the bucket is full and its key gone.
    await refund(store, { policies: [{ ...policy, cost: 10 }], memberId: "x", at: T, now: T });
    await refund(store, { policies: [{ ...policy, cost: 10 }], memberId: "x", at: T, now: T });
    expect(await redis.exists(policy.redisKey)).toBe(0);
    expect(
      await evaluatePolicy(store, { ...policy, cost: 10, memberId: "w", now: T }),
    ).toMatchObject({
      allowed: true,
    });
    expect(
      (await evaluatePolicy(store, { ...policy, cost: 1, memberId: "v", now: T })).allowed,
    ).toBe(false);
  });

  it("several policies at once; with a request id only an admitted, unrefunded request, and a retry is counted afresh", async () => {
    const policies = [
      spec("multi-log", "sliding-log", 3, 1),
      spec("multi-fixed", "fixed-window", 3, 1),
    ];
    const ask = (memberId: string, requestId?: string) =>
      evaluate(store, { policies, memberId, now: T + 10, requestId });
    const first = await ask("r1", "req");
    expect(first.allowed).toBe(true);
    const give = () =>
      refund(store, { policies, memberId: "r1", at: first.now, now: T + 10, requestId: "req" });
    expect(await give()).toEqual({ refunded: true, units: [1, 1] });
    expect(await give()).toEqual({ refunded: false, units: [0, 0] });
    expect(await logCount(redis, policies[0]?.redisKey ?? "")).toBe(0);
    // The refunded request is retried: decided and counted again, not replayed.
    expect(await ask("r1b", "req")).toMatchObject({ allowed: true, replayed: false });
    expect(await logCount(redis, policies[0]?.redisKey ?? "")).toBe(1);
    // The first receipt refunded again finds the retry's record: that is another decision, so
    // nothing is given back (before, the retry's unit was: 6 admitted at limit 5 after it).
    expect(await give()).toEqual({ refunded: false, units: [0, 0] });
    expect(await logCount(redis, policies[0]?.redisKey ?? "")).toBe(1);
    // A denied request (by request id) has nothing to refund.
    await ask("f1");
    await ask("f2");
    const denied = await ask("d1", "denied");
    expect(denied.allowed).toBe(false);
    expect(
      await refund(store, {
        policies,
        memberId: "d1",
        at: denied.now,
        now: T + 10,
        requestId: "denied",
      }),
    ).toEqual({ refunded: false, units: [0, 0] });
    expect((await ask("g1")).allowed).toBe(false);
  });
});
