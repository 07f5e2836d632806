import { describe, expect, it } from "vitest";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { requestRecordKey, storageKey } from "../../../src/store/keys";
import { resetQuota } from "../../../src/store/peek-reset";
import { refund } from "../../../src/store/refund";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("idempotency");
const store = testStore(10_000);

const log = (name: string, limit = 5, cost = 1): StorePolicy => ({
  redisKey: storageKey(prefix, name, "client"),
  algorithm: "sliding-log",
  limit,
  windowMs: 60_000,
  cost,
});

describe("a request id is counted once", () => {
  it("100 concurrent retries of one request id consume once and all get the original answer", async () => {
    const policy = log("concurrent", 5, 2);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        evaluatePolicy(store, { ...policy, memberId: `m${i}`, now: T, requestId: "req-1" }),
      ),
    );
    expect(await logCount(redis, policy.redisKey)).toBe(2);
    expect(results.filter((r) => r.replayed)).toHaveLength(99);
    for (const r of results) {
      expect(r).toMatchObject({ allowed: true, remaining: 3, reset: T + 60_000, now: T });
    }
  });

  it("a retry later in the window gets the original decision, not a new one", async () => {
    const policy = log("later", 2);
    const first = await evaluatePolicy(store, { ...policy, memberId: "a", now: T, requestId: "r" });
    expect(first).toMatchObject({ allowed: true, remaining: 1, replayed: false });
    expect((await evaluatePolicy(store, { ...policy, memberId: "b", now: T + 1 })).allowed).toBe(
      true,
    );
    // The log is full now, but the retry was admitted the first time: it stays admitted.
    const retry = await evaluatePolicy(store, {
      ...policy,
      memberId: "c",
      now: T + 2,
      requestId: "r",
    });
    expect(retry).toEqual({ ...first, replayed: true });
    expect(await logCount(redis, policy.redisKey)).toBe(2);
    // Another id is another request.
    expect(
      await evaluatePolicy(store, { ...policy, memberId: "d", now: T + 3, requestId: "r2" }),
    ).toMatchObject({ allowed: false, replayed: false });
    // The record lives for the window, plus the 1 s grace every key gets on the caller's clock.
    const ttl = await redis.pttl(requestRecordKey([policy.redisKey], "r"));
    expect(ttl).toBeGreaterThan(55_000);
    expect(ttl).toBeLessThanOrEqual(61_000);
  });

  it("a denial is replayed only until it could change (its retryAfterMs)", async () => {
    const policy = log("denied", 1);
    await evaluatePolicy(store, { ...policy, memberId: "a", now: T });
    const denied = await evaluatePolicy(store, {
      ...policy,
      memberId: "b",
      now: T + 59_000,
      requestId: "d",
    });
    expect(denied).toMatchObject({ allowed: false, retryAfterMs: 1_000 });
    const ttl = await redis.pttl(requestRecordKey([policy.redisKey], "d"));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_000);
    const retry = await evaluatePolicy(store, {
      ...policy,
      memberId: "c",
      now: T + 59_500,
      requestId: "d",
    });
    expect(retry).toEqual({ ...denied, replayed: true });
  });

  it("works for several policies (the record is per id and policy set) and every algorithm", async () => {
    const policies: StorePolicy[] = [
      log("multi-log", 3),
      { ...log("multi-fixed", 3), algorithm: "fixed-window" },
      { ...log("multi-counter", 3), algorithm: "sliding-counter" },
      { ...log("multi-bucket", 3), algorithm: "token-bucket" },
    ];
    const ask = (requestId: string, now: number) =>
      evaluate(store, { policies, memberId: `${requestId}-${now}`, now, requestId });
    const first = await ask("x", T);
    expect(first).toMatchObject({ allowed: true, replayed: false });
    for (let i = 1; i <= 5; i++) {
      // A replay names the member id the original was decided under (a refund of the original
      // gives back only that decision; a slot call's is its slot).
      expect(await ask("x", T + i)).toEqual({ ...first, replayed: true, member: `x-${T}` });
    }
    expect((await ask("y", T + 10)).allowed).toBe(true);
    expect((await ask("z", T + 10)).allowed).toBe(true);
    // x, y, z: three admissions in every policy, the limit; a fourth id is denied everywhere.
    expect(await ask("w", T + 10)).toMatchObject({ allowed: false });
    expect(await logCount(redis, policies[0]?.redisKey ?? "")).toBe(3);
    // The same id with only one of the policies is another evaluation (another reply shape).
    const alone = await evaluate(store, {
      policies: [policies[0] as StorePolicy],
      memberId: "alone",
      now: T + 11,
      requestId: "x",
    });
    expect(alone).toMatchObject({ allowed: false, replayed: false });
  });

  it("keeps request ids with special characters apart and in the policy key's hash slot", async () => {
    const policy = log("special", 10);
    const ids = ["a:b", "a%3Ab", "{x}", "ключ ✓"];
    for (const requestId of ids) {
      const r = await evaluatePolicy(store, { ...policy, memberId: requestId, now: T, requestId });
      expect(r.replayed, requestId).toBe(false);
    }
    expect(await logCount(redis, policy.redisKey)).toBe(ids.length);
    for (const requestId of ids) {
      const record = requestRecordKey([policy.redisKey], requestId);
      expect(record.match(/[{}]/g)).toEqual(["{", "}"]);
      expect(record.startsWith(policy.redisKey)).toBe(true);
    }
  });
});

describe("a reset forgets the request ids recorded for its key", () => {
  const reset = (name: string, algorithm: StorePolicy["algorithm"] = "sliding-log") =>
    resetQuota(store, { prefix, policy: name, key: "client", algorithm });
  // A policy of another algorithm, under that algorithm's key (as the limiter builds it).
  const other = (name: string, algorithm: StorePolicy["algorithm"], limit: number) => ({
    ...log(name, limit),
    redisKey: storageKey(prefix, name, "client", algorithm),
    algorithm,
  });

  it("an admitted request's id: after the reset the same id is decided afresh and counted", async () => {
    const policy = log("reset-admitted", 2);
    const first = await evaluatePolicy(store, { ...policy, memberId: "a", now: T, requestId: "r" });
    expect(first).toMatchObject({ allowed: true, remaining: 1, replayed: false });
    expect(await reset("reset-admitted")).toBe(true);
    const again = await evaluatePolicy(store, {
      ...policy,
      memberId: "b",
      now: T + 10,
      requestId: "r",
    });
    expect(again).toMatchObject({ allowed: true, remaining: 1, replayed: false, now: T + 10 });
    expect(await logCount(redis, policy.redisKey)).toBe(1);
    // Recorded after the reset: replayed as usual from now on.
    expect(
      await evaluatePolicy(store, { ...policy, memberId: "c", now: T + 20, requestId: "r" }),
    ).toEqual({ ...again, replayed: true });
    expect(await logCount(redis, policy.redisKey)).toBe(1);
    // A second reset forgets that record too.
    await reset("reset-admitted");
    expect(
      await evaluatePolicy(store, { ...policy, memberId: "d", now: T + 30, requestId: "r" }),
    ).toMatchObject({ remaining: 1, replayed: false });
  });

  it("a denied request's id: after the reset it is admitted, not replayed as denied", async () => {
    const policy = log("reset-denied", 1);
    await evaluatePolicy(store, { ...policy, memberId: "a", now: T });
    const denied = await evaluatePolicy(store, {
      ...policy,
      memberId: "b",
      now: T + 1,
      requestId: "d",
    });
    expect(denied).toMatchObject({ allowed: false, replayed: false });
    await reset("reset-denied");
    expect(
      await evaluatePolicy(store, { ...policy, memberId: "c", now: T + 2, requestId: "d" }),
    ).toMatchObject({ allowed: true, remaining: 0, replayed: false });
  });

  it("a reset of any one policy of a several-policy request, any algorithm, forgets its id", async () => {
    const policies: StorePolicy[] = [
      log("reset-multi-log", 3),
      other("reset-multi-bucket", "token-bucket", 3),
    ];
    const ask = (now: number) =>
      evaluate(store, { policies, memberId: `m-${now}`, now, requestId: "x" });
    expect(await ask(T)).toMatchObject({ allowed: true, replayed: false });
    expect(await ask(T + 1)).toMatchObject({ replayed: true });
    // The record lives under the first policy's key; resetting the second forgets it as well.
    expect(await reset("reset-multi-bucket", "token-bucket")).toBe(true);
    const afresh = await ask(T + 2);
    expect(afresh).toMatchObject({ allowed: true, replayed: false });
    expect(afresh.policies.map((p) => p.remaining)).toEqual([1, 2]);
  });

  it("a refund of a request admitted before the reset gives nothing back", async () => {
    const policy = other("reset-refund", "fixed-window", 3);
    const first = await evaluatePolicy(store, { ...policy, memberId: "a", now: T, requestId: "f" });
    expect(first).toMatchObject({ allowed: true, remaining: 2 });
    await reset("reset-refund", "fixed-window");
    const after = await evaluatePolicy(store, { ...policy, memberId: "b", now: T + 1 });
    expect(after).toMatchObject({ allowed: true, remaining: 2 });
    // The reset already forgot the first request: refunding it must not free the second's unit.
    expect(
      await refund(store, { policies: [policy], memberId: "a", at: T, now: T + 2, requestId: "f" }),
    ).toEqual({ refunded: false, units: [0] });
    expect(await evaluatePolicy(store, { ...policy, memberId: "c", now: T + 3 })).toMatchObject({
      remaining: 1,
    });
  });
});

describe("a request id's retry with other parameters is a conflict, not a replay", () => {
  it("a retry with another cost is refused naming the cost, counts nothing, the record stands", async () => {
    const policy = log("conflict-cost", 100);
    const first = await evaluate(store, {
      policies: [{ ...policy, cost: 1 }],
      memberId: "a",
      now: T,
      requestId: "X",
    });
    expect(first).toMatchObject({ allowed: true, replayed: false });
    const costly = await evaluate(store, {
      policies: [{ ...policy, cost: 100 }],
      memberId: "b",
      now: T + 1,
      requestId: "X",
    });
    expect(costly).toMatchObject({
      allowed: false,
      replayed: false,
      conflict: { index: 0, field: "cost", recorded: "1", asked: "100" },
    });
    expect(await logCount(redis, policy.redisKey)).toBe(1);
    // The genuine retry still replays.
    const retry = await evaluate(store, {
      policies: [{ ...policy, cost: 1 }],
      memberId: "c",
      now: T + 2,
      requestId: "X",
    });
    expect(retry).toEqual({ ...first, replayed: true, member: "a" });
    expect(await logCount(redis, policy.redisKey)).toBe(1);
  });

  it("names the limit, the window, the algorithm, and the policy that differs", async () => {
    const a = log("conflict-a", 10);
    const b = log("conflict-b", 10);
    const ask = (policies: StorePolicy[], memberId: string) =>
      evaluate(store, { policies, memberId, now: T, requestId: "Y" });
    expect(await ask([a, b], "m1")).toMatchObject({ allowed: true });
    expect(await ask([a, { ...b, limit: 20 }], "m2")).toMatchObject({
      allowed: false,
      conflict: { index: 1, field: "limit", recorded: "10", asked: "20" },
    });
    expect(await ask([{ ...a, windowMs: 1_000 }, b], "m3")).toMatchObject({
      conflict: { index: 0, field: "windowMs", recorded: "60000", asked: "1000" },
    });
    // The same keys asked under another algorithm: the record tells them apart.
    expect(await ask([a, { ...b, algorithm: "fixed-window" }], "m4")).toMatchObject({
      conflict: {
        index: 1,
        field: "algorithm",
        recorded: "sliding-log",
        asked: "fixed-window",
      },
    });
    expect(await logCount(redis, a.redisKey)).toBe(1);
    expect(await logCount(redis, b.redisKey)).toBe(1);
  });

  it("a denied request's retry with a smaller cost is a conflict too (not decided afresh)", async () => {
    const policy = log("conflict-denied", 5);
    const denied = await evaluate(store, {
      policies: [{ ...policy, cost: 5 }],
      memberId: "a",
      now: T,
      requestId: "D",
    });
    expect(denied.allowed).toBe(true);
    const over = await evaluate(store, {
      policies: [{ ...policy, cost: 3 }],
      memberId: "b",
      now: T + 1,
      requestId: "E",
    });
    expect(over).toMatchObject({ allowed: false, replayed: false });
    expect(
      await evaluate(store, {
        policies: [{ ...policy, cost: 1 }],
        memberId: "c",
        now: T + 2,
        requestId: "E",
      }),
    ).toMatchObject({ allowed: false, conflict: { field: "cost", recorded: "3", asked: "1" } });
    expect(await logCount(redis, policy.redisKey)).toBe(5);
  });

  it("a refund with other parameters than the recorded ones gives nothing back", async () => {
    const policy = { ...log("conflict-refund", 10), algorithm: "fixed-window" as const };
    policy.redisKey = storageKey(prefix, "conflict-refund", "client", "fixed-window");
    await evaluate(store, { policies: [policy], memberId: "a", now: T, requestId: "R" });
    expect(
      await refund(store, {
        policies: [{ ...policy, cost: 5 }],
        memberId: "a",
        at: T,
        now: T + 1,
        requestId: "R",
      }),
    ).toEqual({ refunded: false, units: [0] });
    // As evaluated, it is refunded.
    expect(
      await refund(store, { policies: [policy], memberId: "a", at: T, now: T + 2, requestId: "R" }),
    ).toEqual({ refunded: true, units: [1] });
  });

  it("a record written before fingerprints (no third part) is replayed as it always was", async () => {
    const policy = log("conflict-legacy", 10);
    const record = requestRecordKey([policy.redisKey], "L");
    // The reply as the evaluate script stored it then: allowed, deniedBy, replayed, now, then
    // allowed, remaining, reset, retryAfterMs.
    await redis.set(record, `1,0,0,${T},1,9,${T + 60_000},0`, { px: 60_000 });
    expect(
      await evaluate(store, {
        policies: [{ ...policy, cost: 7 }],
        memberId: "a",
        now: T + 1,
        requestId: "L",
      }),
    ).toMatchObject({ allowed: true, replayed: true, now: T });
    expect(await logCount(redis, policy.redisKey)).toBe(0);
  });
});
