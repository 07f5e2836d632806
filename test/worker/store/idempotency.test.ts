import { describe, expect, it } from "vitest";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { requestRecordKey, storageKey } from "../../../src/store/keys";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("idempotency");
const store = testStore(10_000);

const log = (name: string, limit = 5, cost = 1): StorePolicy => ({
  key: storageKey(prefix, name, "client"),
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
    expect(await redis.zcard(policy.key)).toBe(2);
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
    expect(await redis.zcard(policy.key)).toBe(2);
    // Another id is another request.
    expect(
      await evaluatePolicy(store, { ...policy, memberId: "d", now: T + 3, requestId: "r2" }),
    ).toMatchObject({ allowed: false, replayed: false });
    // The record lives for the window, plus the 1 s grace every key gets on the caller's clock.
    const ttl = await redis.pttl(requestRecordKey([policy.key], "r"));
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
    const ttl = await redis.pttl(requestRecordKey([policy.key], "d"));
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
      expect(await ask("x", T + i)).toEqual({ ...first, replayed: true });
    }
    expect((await ask("y", T + 10)).allowed).toBe(true);
    expect((await ask("z", T + 10)).allowed).toBe(true);
    // x, y, z: three admissions in every policy, the limit; a fourth id is denied everywhere.
    expect(await ask("w", T + 10)).toMatchObject({ allowed: false });
    expect(await redis.zcard(policies[0]?.key ?? "")).toBe(3);
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
    expect(await redis.zcard(policy.key)).toBe(ids.length);
    for (const requestId of ids) {
      const record = requestRecordKey([policy.key], requestId);
      expect(record.match(/[{}]/g)).toEqual(["{", "}"]);
      expect(record.startsWith(policy.key)).toBe(true);
    }
  });
});
