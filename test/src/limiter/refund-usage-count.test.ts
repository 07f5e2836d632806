// A refund and a settle of one request's usage count (a fixed window, a period: no entry per
// request) are one or the other, by the request's once-gate, which the refund takes in its own
// script (store/lua/refund-driver.lua.ts): one store call, on the real store through the bridge,
// on a manual clock.
import { beforeAll, describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { settleGateKey, storageKey } from "../../../src/store/keys";
import { counting, manualClock } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("refund-usage-count");
const clock = manualClock(Date.parse("2026-03-20T12:00:10Z"));
const client = counting(testStore());
const limiter = createLimiter({ store: client.store, prefix, clock: "caller", now: clock.now });

const perMinute = (key: string, cost = 50): LimitRequest => ({
  policy: "tokens-minute",
  key,
  limit: 100,
  windowMs: 60_000,
  cost,
  algorithm: "fixed-window",
  usage: true,
});
// A plain rule beside it: no usage (its refund is a refund as any, once, by the same gate).
const plain = (key: string): LimitRequest => ({
  policy: "per-minute",
  key,
  limit: 10,
  windowMs: 60_000,
  cost: 3,
  algorithm: "fixed-window",
});

const newKey = () => `k-${crypto.randomUUID()}`;
const countOf = async (key: string, policy = "tokens-minute") =>
  (await redis.get<string>(storageKey(prefix, policy, key, "fixed-window")))?.split(":")[2];

async function admit(requests: LimitRequest[], requestId?: string): Promise<RefundReceipt> {
  const decided = await limiter.limitAll(requests, requestId ? { requestId } : undefined);
  expect(decided.allowed).toBe(true);
  return decided.receipt as RefundReceipt;
}

describe("a refund of a usage count", () => {
  // The refund script loaded: a NOSCRIPT's EVAL would be a second call.
  beforeAll(async () => {
    await limiter.refund(await admit([perMinute(newKey())]));
  });

  it("first: gives the reservation back in one store call, and a settle after it charges nothing", async () => {
    const key = newKey();
    const receipt = await admit([perMinute(key)]);
    const before = client.calls();
    expect(await limiter.refund(receipt)).toEqual({ refunded: true, units: [50] });
    expect(client.calls() - before).toBe(1);
    const gate = settleGateKey(
      storageKey(prefix, "tokens-minute", key, "fixed-window"),
      receipt.memberId,
    );
    // "r": a count given back (a settle answers unknown); its one policy flagged refunded.
    expect(await redis.get<string>(gate)).toBe("r1");
    expect(await limiter.settle(receipt, 0)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await countOf(key)).toBe("0");
  });

  it("after a settle: gives nothing of the count back (the settle's charge stands), the plain rule's cost yes, the request id's record kept", async () => {
    const key = newKey();
    const receipt = await admit([perMinute(key), plain(key)], `rid-${key}`);
    expect(await limiter.settle(receipt, 20)).toMatchObject({
      status: "settled",
      charged: [-30],
    });
    const before = client.calls();
    expect(await limiter.refund(receipt)).toEqual({ refunded: true, units: [0, 3] });
    expect(client.calls() - before).toBe(1);
    expect(await countOf(key)).toBe("20");
    expect(await countOf(key, "per-minute")).toBe("0");
    // A partial refund leaves the record: a retry replays the admission, counted nowhere.
    const retry = await limiter.limitAll([perMinute(key), plain(key)], { requestId: `rid-${key}` });
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    expect(await countOf(key)).toBe("20");
  });

  it("only counts after a settle: nothing given back, nothing refunded", async () => {
    const key = newKey();
    const receipt = await admit([perMinute(key)]);
    expect(await limiter.settle(receipt, 70)).toMatchObject({ status: "settled", charged: [20] });
    expect(await limiter.refund(receipt)).toEqual({ refunded: false, units: [0] });
    expect(await countOf(key)).toBe("70");
  });

  it("with a request id, once: the second refund gives nothing back, the retry is decided afresh", async () => {
    const key = newKey();
    const receipt = await admit([perMinute(key), plain(key)], `rid-${key}`);
    expect(await limiter.refund(receipt)).toEqual({ refunded: true, units: [50, 3] });
    expect(await limiter.refund(receipt)).toEqual({
      refunded: false,
      units: [0, 0],
      alreadyRefunded: true,
    });
    expect(await countOf(key)).toBe("0");
    expect(await limiter.settle(receipt, 0)).toMatchObject({ status: "unknown" });
    const retry = await limiter.limitAll([perMinute(key), plain(key)], { requestId: `rid-${key}` });
    expect(retry).toMatchObject({ allowed: true, replayed: false });
    expect(await countOf(key)).toBe("50");
  });

  it("of the plain rule alone leaves the count to its settle, and gives back once", async () => {
    const key = newKey();
    const receipt = await admit([perMinute(key), plain(key)]);
    const gate = settleGateKey(
      storageKey(prefix, "tokens-minute", key, "fixed-window"),
      receipt.memberId,
    );
    expect(await limiter.refund(receipt, { policies: ["per-minute"] })).toEqual({
      refunded: true,
      units: [3],
    });
    // "p": refunded in part, no count given back; the plain rule (second) flagged.
    expect(await redis.get<string>(gate)).toBe("p01");
    expect(await limiter.settle(receipt, 10)).toMatchObject({ status: "settled", charged: [-40] });
    expect(await countOf(key)).toBe("10");
    // The settle's now, the refund's flag kept: neither part gives back again.
    // (The client reads "101" as JSON: a number.)
    expect(String(await redis.get(gate))).toBe("101");
    expect(await limiter.refund(receipt)).toEqual({
      refunded: false,
      units: [0, 0],
      alreadyRefunded: true,
    });
    expect(await limiter.settle(receipt, 10)).toMatchObject({ status: "already-settled" });
    expect(await countOf(key)).toBe("10");
    expect(await countOf(key, "per-minute")).toBe("0");
  });
});
