// What a `limit()` caller's numbers can do to the limiter: nothing but a PolicyBoundsError. A
// field the store must not be asked with (a window missing, a string, -5, 1e12; a limit or cost
// out of range; a key that is not a string) is refused before the breaker and the store, so it
// never counts as a store failure, never opens the breaker and never moves the clock.
import { describe, expect, it } from "vitest";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { CountedReceipt } from "../../../src/limiter/receipt-state";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { MAX_LIMIT, MAX_WINDOW_MS } from "../../../src/store/caps";
import { peekQuota } from "../../../src/store/peek-reset";
import { PolicyBoundsError } from "../../../src/store/script-inputs";
import type { ClockChangeEvent } from "../../../src/store/store-clock";
import { counting } from "../../support/worker/fault-control";
import { deleteKeys, scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("hostile");

const good = { policy: "h", key: "k", limit: 5, windowMs: 60_000 } satisfies LimitRequest;

/** Requests a plain-JS caller can send; each with the field it must be refused for. */
const HOSTILE: { name: string; request: Record<string, unknown>; field: string }[] = [
  { name: "windowMs missing", request: { ...good, windowMs: undefined }, field: "windowMs" },
  { name: "windowMs a string", request: { ...good, windowMs: "60000" }, field: "windowMs" },
  { name: "windowMs -5", request: { ...good, windowMs: -5 }, field: "windowMs" },
  { name: "windowMs 1e12", request: { ...good, windowMs: 1e12 }, field: "windowMs" },
  { name: "windowMs 0", request: { ...good, windowMs: 0 }, field: "windowMs" },
  { name: "windowMs 1.5", request: { ...good, windowMs: 1.5 }, field: "windowMs" },
  { name: "windowMs NaN", request: { ...good, windowMs: Number.NaN }, field: "windowMs" },
  {
    name: "windowMs past 7 days",
    request: { ...good, windowMs: MAX_WINDOW_MS + 1 },
    field: "windowMs",
  },
  { name: "limit missing", request: { ...good, limit: undefined }, field: "limit" },
  { name: "limit 0", request: { ...good, limit: 0 }, field: "limit" },
  { name: "limit a string", request: { ...good, limit: "5" }, field: "limit" },
  { name: "limit 2.5", request: { ...good, limit: 2.5 }, field: "limit" },
  { name: "limit past the cap", request: { ...good, limit: MAX_LIMIT + 1 }, field: "limit" },
  { name: "cost 0", request: { ...good, cost: 0 }, field: "cost" },
  { name: "cost -1", request: { ...good, cost: -1 }, field: "cost" },
  { name: "cost a string", request: { ...good, cost: "1" }, field: "cost" },
  { name: "cost above the limit", request: { ...good, cost: 6 }, field: "cost" },
  { name: "key a number", request: { ...good, key: 42 }, field: "key" },
  { name: "key empty", request: { ...good, key: "" }, field: "key" },
  { name: "key missing", request: { ...good, key: undefined }, field: "key" },
  { name: "key an object", request: { ...good, key: { toString: () => "k" } }, field: "key" },
  { name: "algorithm unknown", request: { ...good, algorithm: "leaky" }, field: "algorithm" },
  { name: "policy with a colon", request: { ...good, policy: "a:b" }, field: "policy" },
  { name: "policy a number", request: { ...good, policy: 7 }, field: "policy" },
  { name: "failMode unknown", request: { ...good, failMode: "maybe" }, field: "failMode" },
];

function limiterWithEvents() {
  const counted = counting(testStore(5_000));
  const breakerEvents: BreakerEvent[] = [];
  const clockEvents: ClockChangeEvent[] = [];
  const storeErrors: unknown[] = [];
  const limiter = createLimiter({
    store: counted.store,
    prefix,
    timeoutMs: 5_000,
    breaker: { failureThreshold: 1 },
    onBreakerChange: (event) => breakerEvents.push(event),
    onClockChange: (event) => clockEvents.push(event),
    onStoreError: (error) => storeErrors.push(error),
  });
  return { limiter, counted, breakerEvents, clockEvents, storeErrors };
}

describe("a limit() caller's hostile numbers", () => {
  it("each is a PolicyBoundsError naming the field, before any store call: the breaker, the clock and the store never hear of it", async () => {
    const { limiter, counted, breakerEvents, clockEvents, storeErrors } = limiterWithEvents();
    for (const { name, request, field } of HOSTILE) {
      const hostile = { ...request, policy: request.policy ?? "h" } as unknown as LimitRequest;
      const single = limiter.limit(hostile);
      await expect(single, name).rejects.toThrow(PolicyBoundsError);
      await expect(single, name).rejects.toMatchObject({ field, index: 0 });
      // In a multi-policy call: the second policy, named by its index.
      const multi = limiter.limitAll([{ ...good, policy: "h-first" }, hostile]);
      await expect(multi, name).rejects.toMatchObject({
        name: "PolicyBoundsError",
        field,
        index: 1,
      });
    }
    expect(counted.calls()).toBe(0);
    expect(breakerEvents).toEqual([]);
    expect(clockEvents).toEqual([]);
    expect(storeErrors).toEqual([]);
    // Nothing was written, and the store still decides (the breaker, threshold 1, is closed).
    expect(await redis.keys(`${prefix}:*`)).toEqual([]);
    expect(await limiter.limit(good)).toMatchObject({ allowed: true, source: "redis" });
    // (EVALSHA, and EVAL after it when this Redis has not loaded the script yet.)
    expect(counted.calls()).toBeGreaterThan(0);
  });

  it("a window of -5 never yields a reset in the past, and 1e12 never moves the limiter off the Redis clock", async () => {
    const { limiter, clockEvents } = limiterWithEvents();
    const before = Date.now();
    await expect(limiter.limit({ ...good, key: "neg", windowMs: -5 })).rejects.toThrow(
      PolicyBoundsError,
    );
    await expect(limiter.limit({ ...good, key: "huge", windowMs: 1e12 })).rejects.toThrow(
      /windowMs must be an integer of ms from 1 to 604800000/,
    );
    const decision = await limiter.limit({ ...good, key: "after" });
    expect(decision.source).toBe("redis");
    expect(decision.reset).toBeGreaterThanOrEqual(before);
    expect(clockEvents).toEqual([]);
  });

  it("a refund of a tampered receipt is refused as the caller's error, not a store failure; nothing is touched", async () => {
    const { limiter, storeErrors, counted } = limiterWithEvents();
    const outcome = await limiter.limitAll([{ ...good, key: "refund" }]);
    const receipt = outcome.receipt as RefundReceipt;
    expect(receipt).toBeDefined();
    const calls = counted.calls();
    const tampered = {
      ...receipt,
      resolved: (receipt as CountedReceipt).resolved.map((policy) => ({
        ...policy,
        windowMs: 1e12,
      })),
    };
    const refused = await limiter.refund(tampered);
    expect(refused).toMatchObject({ refunded: false, units: [] });
    expect(refused.error).toMatch(/PolicyBoundsError: refund: policies\[0\]\.windowMs/);
    const garbage = await limiter.refund({ memberId: 5 } as unknown as RefundReceipt);
    expect(garbage).toMatchObject({ refunded: false, units: [] });
    expect(garbage.error).toMatch(/PolicyBoundsError/);
    expect(counted.calls()).toBe(calls);
    expect(storeErrors).toEqual([]);
    // The real receipt still refunds.
    expect(await limiter.refund(receipt)).toMatchObject({ refunded: true, units: [1] });
  });

  it("peek refuses the same fields before asking Redis", async () => {
    const store = testStore(5_000);
    const quota = { prefix, policy: "h", key: "peek", limit: 5, windowMs: 60_000 };
    for (const bad of [
      { windowMs: 1e12 },
      { windowMs: -5 },
      { windowMs: "60000" },
      { limit: 0 },
      { cost: 6 },
      { key: 42 },
    ]) {
      const peek = peekQuota(store, { ...quota, ...bad } as typeof quota);
      await expect(peek, JSON.stringify(bad)).rejects.toThrow(PolicyBoundsError);
    }
    expect(await peekQuota(store, quota)).toMatchObject({ allowed: true, remaining: 5 });
    await deleteKeys(redis, `${prefix}:*`);
  });
});
