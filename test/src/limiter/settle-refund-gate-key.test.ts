import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { manualClock } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// A settle of some usage rules and a refund of the request take one once-gate: named from all
// the request's rules, whichever of them the call settles or gives back.
const redis = testRedis();
const prefix = scopedPrefix("settle-refund-gate-key");
const clock = manualClock(Date.parse("2026-03-20T12:00:10Z"));
const limiter = createLimiter({ store: testStore(), prefix, clock: "caller", now: clock.now });
const rule = (policy: string, key: string): LimitRequest => ({
  policy,
  key,
  limit: 100,
  windowMs: 60_000,
  cost: 50,
  algorithm: "fixed-window",
  usage: true,
});
const countOf = async (policy: string, key: string) =>
  (await redis.get<string>(storageKey(prefix, policy, key, "fixed-window")))?.split(":")[2];

describe("a settle of the second usage count only", () => {
  it("then a refund: the settled count keeps its charge", async () => {
    const key = `k-${crypto.randomUUID()}`;
    const d = await limiter.limitAll([rule("u1", key), rule("u2", key)]);
    const receipt = d.receipt as RefundReceipt;
    expect(await limiter.settle(receipt, { u2: 10 })).toMatchObject({
      status: "settled",
      charged: [-40],
    });
    expect(await countOf("u2", key)).toBe("10");
    const refunded = await limiter.refund(receipt);
    expect(refunded.units[1]).toBe(0);
    expect(await countOf("u2", key)).toBe("10");
  });

  it("after a refund of the same rule: nothing given back again", async () => {
    const key = `k-${crypto.randomUUID()}`;
    // Another request fills u2 by 50, so a second give-back would show.
    await limiter.limitAll([rule("u1", key), rule("u2", key)]);
    const d = await limiter.limitAll([rule("u1", key), rule("u2", key)]);
    const receipt = d.receipt as RefundReceipt;
    expect((await limiter.refund(receipt, { policies: ["u2"] })).units).toEqual([50]);
    const settled = await limiter.settle(receipt, { u2: 0 });
    expect(settled.status).toBe("unknown");
    expect(await countOf("u2", key)).toBe("50");
  });
});
