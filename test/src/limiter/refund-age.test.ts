import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { MAX_SETTLE_AGE_MS } from "../../../src/store/caps";
import { settleGateKey, storageKey } from "../../../src/store/keys";
import { manualClock } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// A refund more than MAX_SETTLE_AGE_MS after its admission gives nothing back, whatever the
// algorithm: the once-gate and a reset's tombstone live about that long, and after them a
// refund on a longer window would give back again, or from counts not the request's.
const redis = testRedis();
const prefix = scopedPrefix("refund-age");
const clock = manualClock(Date.parse("2026-03-16T00:00:10Z"));
const limiter = createLimiter({ store: testStore(), prefix, clock: "caller", now: clock.now });
const WEEK = 7 * 24 * 3600_000;
const weekly = (
  algorithm: "fixed-window" | "sliding-log" | "token-bucket",
  key: string,
  usage = false,
): LimitRequest => ({
  policy: `wk-${algorithm}`,
  key,
  limit: 100,
  windowMs: WEEK,
  cost: 50,
  algorithm,
  usage,
});
const countOf = async (key: string) =>
  (await redis.get<string>(storageKey(prefix, "wk-fixed-window", key, "fixed-window")))?.split(
    ":",
  )[2];

describe("a refund past the settle age", () => {
  for (const algorithm of ["fixed-window", "sliding-log", "token-bucket"] as const) {
    it(`${algorithm}: gives back at the age, nothing a millisecond after`, async () => {
      const key = `k-${crypto.randomUUID()}`;
      const early = (await limiter.limitAll([weekly(algorithm, key)])).receipt as RefundReceipt;
      const late = (await limiter.limitAll([weekly(algorithm, key)])).receipt as RefundReceipt;
      expect(late.at - early.at).toBe(0);
      clock.advance(MAX_SETTLE_AGE_MS);
      expect((await limiter.refund(early)).units).toEqual([50]);
      clock.advance(1);
      expect(await limiter.refund(late)).toMatchObject({ refunded: false, units: [0] });
    });
  }

  it("a weekly count refunded after its gate is gone gives nothing back again", async () => {
    const key = `k-${crypto.randomUUID()}`;
    await limiter.limitAll([weekly("fixed-window", key)]);
    const receipt = (await limiter.limitAll([weekly("fixed-window", key)]))
      .receipt as RefundReceipt;
    expect((await limiter.refund(receipt)).units).toEqual([50]);
    const k = storageKey(prefix, "wk-fixed-window", key, "fixed-window");
    // The gate's PX has run out (it lives a day and a minute): as if so.
    await redis.del(settleGateKey(k, receipt.memberId));
    clock.advance(26 * 3600_000);
    expect((await limiter.refund(receipt)).units).toEqual([0]);
    expect(await countOf(key)).toBe("50");
  });

  it("a weekly usage count settled, then refunded after the gate: the charge stays", async () => {
    const key = `k-${crypto.randomUUID()}`;
    await limiter.limitAll([weekly("fixed-window", key, true)]);
    const receipt = (await limiter.limitAll([weekly("fixed-window", key, true)]))
      .receipt as RefundReceipt;
    expect(await limiter.settle(receipt, 50)).toMatchObject({ status: "settled" });
    const k = storageKey(prefix, "wk-fixed-window", key, "fixed-window");
    await redis.del(settleGateKey(k, receipt.memberId));
    clock.advance(26 * 3600_000);
    expect((await limiter.refund(receipt)).units).toEqual([0]);
    expect(await countOf(key)).toBe("100");
  });

  it("a weekly count reset: a refund from before the reset, after its tombstone, gives nothing", async () => {
    const key = `k-${crypto.randomUUID()}`;
    const request = weekly("fixed-window", key);
    const before = (await limiter.limitAll([request])).receipt as RefundReceipt;
    await limiter.reset(request);
    // The tombstone's PX has run out (a day and a minute): as if so.
    await redis.del(storageKey(prefix, "wk-fixed-window", key, "fixed-window"));
    clock.advance(2 * 24 * 3600_000);
    await limiter.limitAll([request]);
    await limiter.limitAll([request]);
    expect((await limiter.refund(before)).units).toEqual([0]);
    expect(await countOf(key)).toBe("100");
  });
});
