// A reset of a usage rule's count (a fixed window, a period) beside a settle or a refund of a
// request admitted before it (store/lua/count-stamp.lua.ts): the count the next admission starts
// is stamped with its birth, and moves only for requests it held. On the real store through the
// bridge, on a manual clock.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { manualClock } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("reset-usage-count");
const clock = manualClock(Date.parse("2026-03-20T12:00:10Z"));
const limiter = createLimiter({ store: testStore(), prefix, clock: "caller", now: clock.now });

const perMinute = (key: string): LimitRequest => ({
  policy: "tokens-minute",
  key,
  limit: 100,
  windowMs: 60_000,
  cost: 30,
  algorithm: "fixed-window",
  usage: true,
});
const perMonth = (key: string): LimitRequest => ({
  policy: "tokens-month",
  key,
  limit: 100,
  windowMs: 0,
  cost: 30,
  algorithm: "calendar",
  period: { unit: "month", timezone: "UTC" },
  usage: true,
});

const newKey = () => `k-${crypto.randomUUID()}`;
const stored = (request: LimitRequest) =>
  redis.get<string>(
    storageKey(prefix, request.policy, request.key, request.algorithm ?? "sliding-log"),
  );

async function admit(request: LimitRequest): Promise<RefundReceipt> {
  const decided = await limiter.limitAll([request]);
  expect(decided.allowed).toBe(true);
  return decided.receipt as RefundReceipt;
}

for (const [name, rule] of [
  ["a fixed window", perMinute],
  ["a calendar period", perMonth],
] as const) {
  describe(`a reset of ${name}'s usage count`, () => {
    it("a request admitted before it settles or refunds nothing of the count after it", async () => {
      const request = rule(newKey());
      const before = await admit(request);
      const refundedLater = await admit(request);
      expect((await limiter.reset(request)).existed).toBe(true);
      clock.advance(1);
      const after = await admit(request);
      // The new count holds 30: neither a give-back nor a refund of the old ones comes out of it.
      expect(await limiter.settle(before, 0)).toMatchObject({ status: "unknown", charged: [0] });
      expect(await limiter.refund(refundedLater)).toMatchObject({ units: [0] });
      expect(await stored(request)).toMatch(/:30:\d+:/);
      // The count's own requests settle as ever, and its stamp stays.
      expect(await limiter.settle(after, 10)).toMatchObject({ status: "settled", charged: [-20] });
      expect(await stored(request)).toMatch(/:10:\d+:/);
      expect(await limiter.limit({ ...request, cost: 90 })).toMatchObject({
        allowed: true,
        remaining: 0,
      });
    });

    it("in the same millisecond: the request that starts the count settles, one beside it changes nothing", async () => {
      const request = rule(newKey());
      const before = await admit(request);
      await limiter.reset(request);
      const first = await admit(request);
      const beside = await admit(request);
      expect(await limiter.settle(before, 0)).toMatchObject({ status: "unknown" });
      // Not told from one before the reset: its reservation stands (never an over-admission).
      expect(await limiter.settle(beside, 0)).toMatchObject({ status: "unknown" });
      expect(await limiter.settle(first, 0)).toMatchObject({ status: "settled", charged: [-30] });
      clock.advance(1);
      const later = await admit(request);
      expect(await limiter.settle(later, 0)).toMatchObject({ status: "settled", charged: [-30] });
    });
  });
}

describe("a reset's tombstone", () => {
  it("is no count: a second reset finds none, the next admission gets the full limit", async () => {
    const request = perMinute(newKey());
    await admit(request);
    expect((await limiter.reset(request)).existed).toBe(true);
    expect(await stored(request)).toBe("reset");
    expect((await limiter.reset(request)).existed).toBe(false);
    expect(await limiter.limit(request)).toMatchObject({ allowed: true, remaining: 70 });
  });

  it("is not written where no count was: the first request after such a reset settles beside another", async () => {
    const request = perMinute(newKey());
    expect((await limiter.reset(request)).existed).toBe(false);
    expect(await stored(request)).toBeNull();
    const first = await admit(request);
    const beside = await admit(request);
    expect(await limiter.settle(beside, 0)).toMatchObject({ status: "settled", charged: [-30] });
    expect(await limiter.settle(first, 0)).toMatchObject({ status: "settled", charged: [-30] });
  });

  it("a count never reset carries no stamp, as counts written before stamps", async () => {
    const request = perMinute(newKey());
    const receipt = await admit(request);
    expect(await stored(request)).toMatch(/^\d+:60000:30$/);
    expect(await limiter.settle(receipt, 5)).toMatchObject({ status: "settled", charged: [-25] });
  });
});
