// limiter.settle (docs/usage.md) on the real store through the bridge, on a fake clock: what it
// answers for each kind of receipt and units, that a give-back reaches this isolate's cached
// denial at once, and that a store that does not answer changes nothing.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { counting, faultScenario, manualClock, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testStore } from "../../support/worker/redis";

const prefix = scopedPrefix("settle");
const clock = manualClock();
const store = counting(testStore(2_000));
const limiter = createLimiter({ store: store.store, prefix, clock: "caller", now: clock.now });

const tokens = (key: string, cost: number): LimitRequest => ({
  policy: "tokens",
  key,
  limit: 100,
  windowMs: 60_000,
  cost,
  algorithm: "sliding-log-weighted",
});

async function admit(request: LimitRequest): Promise<RefundReceipt> {
  const decided = await limiter.limitAll([request]);
  expect(decided.allowed).toBe(true);
  return decided.receipt as RefundReceipt;
}

describe("limiter.settle", () => {
  it("a give-back frees what this isolate was denying from its cache, at once", async () => {
    const receipt = await admit(tokens("cached", 100));
    clock.advance(1_000);
    expect((await limiter.limit(tokens("cached", 10))).allowed).toBe(false);
    // Remembered until the reservation leaves the window: no store call.
    const before = store.calls();
    expect(await limiter.limit(tokens("cached", 10))).toMatchObject({
      allowed: false,
      source: "cache",
    });
    expect(store.calls()).toBe(before);
    expect(await limiter.settle(receipt, 30)).toMatchObject({
      status: "settled",
      policies: ["tokens"],
      charged: [-70],
    });
    expect(await limiter.limit(tokens("cached", 70))).toMatchObject({
      allowed: true,
      remaining: 0,
      source: "redis",
    });
  });

  it("answers unknown for a request without usage rules, and refuses bad units unasked", async () => {
    const plain = await admit({ policy: "plain", key: "k", limit: 10, windowMs: 60_000 });
    expect(await limiter.settle(plain, 5)).toEqual({
      status: "unknown",
      policies: [],
      charged: [],
    });
    const receipt = await admit(tokens("bad-units", 10));
    const before = store.calls();
    for (const units of [-1, 1.5, Number.NaN, 1e13, "5" as unknown as number]) {
      const outcome = await limiter.settle(receipt, units);
      expect(outcome.status).toBe("failed");
      expect(outcome.error).toMatch(/^usage must be an integer/);
    }
    expect(store.calls()).toBe(before);
    // The reservation stands, and still settles once.
    expect((await limiter.settle(receipt, 10)).charged).toEqual([0]);
    expect((await limiter.settle(receipt, 10)).status).toBe("already-settled");
  });

  it("a store that does not answer: failed, nothing charged; a retry then settles once", async () => {
    const scenario = await faultScenario("forward");
    const faulty = createLimiter({
      store: storeAt(scenario.url, 300),
      prefix,
      clock: "caller",
      now: clock.now,
      timeoutMs: 300,
    });
    const decided = await faulty.limitAll([tokens("down", 10)]);
    expect(decided.allowed).toBe(true);
    await scenario.set("error-500");
    const failed = await faulty.settle(decided.receipt as RefundReceipt, 50);
    expect(failed.status).toBe("failed");
    expect(failed.error).toBeDefined();
    await scenario.set("forward");
    expect((await limiter.limit(tokens("down", 1))).remaining).toBe(89);
    expect(await faulty.settle(decided.receipt as RefundReceipt, 50)).toMatchObject({
      status: "settled",
      charged: [40],
    });
  });
});
