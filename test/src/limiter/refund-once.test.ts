// A receipt refunded again (a retried refund: a timeout, a retried webhook) gives nothing back
// the second time, on every algorithm that refunds and over shards: the refund script takes the
// request's once-gate (store/lua/refund-driver.lua.ts). Real store through the bridge, on a
// manual clock: two requests at the same instant, so a log's second refund would find the
// other request's slots of that instant, and a count would lose the cost again.
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import type { Algorithm } from "../../../src/store/algorithm";
import { settleGateKey, storageKey } from "../../../src/store/keys";
import { refundGateLife } from "../../../src/store/refund";
import { manualClock, storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { shardPrefix, shardUrls } from "../../support/worker/shard-stores";

const redis = testRedis();
const prefix = scopedPrefix("refund-once");
const clock = manualClock(Date.parse("2026-03-20T12:00:10Z"));
const limiter = createLimiter({ store: testStore(), prefix, clock: "caller", now: clock.now });

const newKey = () => `k-${crypto.randomUUID()}`;

const FAMILIES: { name: string; rule: (key: string, cost: number) => LimitRequest }[] = [
  ...(["sliding-log", "fixed-window", "sliding-counter", "token-bucket"] as Algorithm[]).map(
    (algorithm) => ({
      name: algorithm,
      rule: (key: string, cost: number): LimitRequest => ({
        policy: `once-${algorithm}`,
        key,
        limit: 5,
        windowMs: 60_000,
        cost,
        algorithm,
      }),
    }),
  ),
  {
    name: "sliding-log-weighted (usage)",
    rule: (key, cost) => ({
      policy: "once-weighted",
      key,
      limit: 5,
      windowMs: 60_000,
      cost,
      usage: true,
    }),
  },
  {
    name: "fixed-window usage count",
    rule: (key, cost) => ({
      policy: "once-usage-count",
      key,
      limit: 5,
      windowMs: 60_000,
      cost,
      algorithm: "fixed-window",
      usage: true,
    }),
  },
  {
    name: "calendar",
    rule: (key, cost) => ({
      policy: "once-calendar",
      key,
      limit: 5,
      windowMs: 0,
      cost,
      algorithm: "calendar",
      period: { unit: "day", timezone: "UTC" },
    }),
  },
];

async function admit(requests: LimitRequest[]): Promise<RefundReceipt> {
  const decided = await limiter.limitAll(requests);
  expect(decided.allowed).toBe(true);
  return decided.receipt as RefundReceipt;
}

describe("a receipt refunded again gives nothing back", () => {
  for (const { name, rule } of FAMILIES) {
    it(`${name}: the second refund says already refunded, the other request still counts`, async () => {
      const key = newKey();
      const first = await admit([rule(key, 2)]);
      await admit([rule(key, 2)]);
      expect(await limiter.refund(first)).toEqual({ refunded: true, units: [2] });
      expect(await limiter.refund(first)).toEqual({
        refunded: false,
        units: [0],
        alreadyRefunded: true,
      });
      // 2 held by the second request: 3 more fit, exactly (given back twice, 2 would be left).
      const rest = await limiter.limitAll([rule(key, 3)]);
      expect(rest).toMatchObject({ allowed: true, decisions: [{ remaining: 0 }] });
      expect((await limiter.limitAll([rule(key, 1)])).allowed).toBe(false);
    });
  }

  it("partial refunds: each policy gives back once, a whole refund after them only the rest", async () => {
    const key = newKey();
    const [ring, fixed] = FAMILIES as [(typeof FAMILIES)[number], (typeof FAMILIES)[number]];
    const receipt = await admit([ring.rule(key, 2), fixed.rule(key, 2)]);
    await admit([ring.rule(key, 2), fixed.rule(key, 2)]);
    const ringName = ring.rule(key, 1).policy;
    expect(await limiter.refund(receipt, { policies: [ringName] })).toEqual({
      refunded: true,
      units: [2],
    });
    expect(await limiter.refund(receipt, { policies: [ringName] })).toMatchObject({
      refunded: false,
      alreadyRefunded: true,
    });
    // The fixed window's cost comes back, the ring's not again.
    expect(await limiter.refund(receipt)).toEqual({ refunded: true, units: [0, 2] });
    expect(await limiter.refund(receipt)).toMatchObject({ alreadyRefunded: true });
    expect(await limiter.limitAll([ring.rule(key, 3), fixed.rule(key, 3)])).toMatchObject({
      allowed: true,
      decisions: [{ remaining: 0 }, { remaining: 0 }],
    });
  });

  it("the gate lives while a refund could give back: twice the longest window, capped at a day", async () => {
    const key = newKey();
    const rule = FAMILIES[0]?.rule(key, 1) as LimitRequest;
    const receipt = await admit([rule]);
    expect(await limiter.refund(receipt)).toMatchObject({ refunded: true });
    const gate = settleGateKey(
      storageKey(prefix, rule.policy, key, "sliding-log"),
      receipt.memberId,
    );
    const ttl = await redis.pttl(gate);
    expect(ttl).toBeGreaterThan(60_000);
    expect(ttl).toBeLessThanOrEqual(2 * 60_000 + 60_000);
    const day = 86_400_000 + 60_000;
    expect(
      refundGateLife([
        { redisKey: "k", algorithm: "sliding-log", limit: 1, windowMs: 7 * 86_400_000, cost: 1 },
      ]),
    ).toBe(day);
  });
});

describe("a sharded receipt refunded again", () => {
  it("each shard's part gives back once: the second refund gives nothing, on any shard", async () => {
    const sharded = createLimiter({
      store: shardUrls().map((url) => storeAt(url, 2_000)),
      prefix: shardPrefix("refund-once"),
      timeoutMs: 2_000,
    });
    // Keys on two shards: the request's parts are refunded each on its own shard.
    const keys: string[] = [];
    const shards = new Set<string>();
    for (let i = 0; keys.length < 2; i++) {
      const key = `once-${crypto.randomUUID()}-${i}`;
      const shard = sharded.shardOf(key);
      if (!shards.has(shard)) {
        shards.add(shard);
        keys.push(key);
      }
    }
    const rules = (cost: number) =>
      keys.map((key, i) => ({ policy: `p${i}`, key, limit: 5, windowMs: 60_000, cost }));
    const first = await sharded.limitAll(rules(2));
    expect(first.allowed).toBe(true);
    expect((await sharded.limitAll(rules(2))).allowed).toBe(true);
    const receipt = first.receipt as RefundReceipt;
    expect(await sharded.refund(receipt)).toEqual({ refunded: true, units: [2, 2] });
    expect(await sharded.refund(receipt)).toEqual({
      refunded: false,
      units: [],
      alreadyRefunded: true,
    });
    const rest = await sharded.limitAll(rules(3));
    expect(rest).toMatchObject({ allowed: true, decisions: [{ remaining: 0 }, { remaining: 0 }] });
  });
});
