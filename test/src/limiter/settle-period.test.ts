// limiter.settle of usage rules counted in a calendar period or a fixed window (docs/usage.md),
// on the real store through the bridge, on a manual clock: a monthly token quota in a timezone
// with an anchor, admitted in units, settled once (given back or charged past the limit), a 429
// until the next period's start, and a settle that comes after its period (or too late) charging
// nothing.
import { describe, expect, it } from "vitest";
import { periodAt } from "../../../src/limiter/calendar-period";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, RefundReceipt } from "../../../src/limiter/types";
import { MAX_SETTLE_AGE_MS } from "../../../src/store/caps";
import { settleGateKey, storageKey } from "../../../src/store/keys";
import { manualClock } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("settle-period");
const clock = manualClock(Date.parse("2026-03-20T12:00:00Z"));
const limiter = createLimiter({ store: testStore(), prefix, clock: "caller", now: clock.now });

// Months start on the 15th at midnight in Berlin: March's runs to April 15th 00:00 CEST, across
// the change to summer time.
const MONTH = {
  unit: "month",
  timezone: "Europe/Berlin",
  anchor: Date.parse("2026-01-15T00:00:00+01:00"),
} as const;
const MARCH = {
  start: Date.parse("2026-03-15T00:00:00+01:00"),
  end: Date.parse("2026-04-15T00:00:00+02:00"),
};

const tokens = (key: string, cost = 4_000, limit = 10_000): LimitRequest => ({
  policy: "tokens-month",
  key,
  limit,
  windowMs: 0,
  cost,
  algorithm: "calendar",
  period: MONTH,
  usage: true,
});

async function admit(request: LimitRequest): Promise<RefundReceipt> {
  const decided = await limiter.limitAll([request]);
  expect(decided.allowed).toBe(true);
  return decided.receipt as RefundReceipt;
}

const newKey = () => `k-${crypto.randomUUID()}`;

describe("a monthly token quota (calendar usage rule)", () => {
  it("admits in units, settles once either way, and denies until the next period", async () => {
    clock.set(Date.parse("2026-03-20T12:00:00Z"));
    expect(periodAt(MONTH, clock.now())).toEqual(MARCH);
    const key = newKey();
    const r1 = await admit(tokens(key));
    const r2 = await admit(tokens(key));
    // 2 000 left: a third reservation of 4 000 waits for April 15th (Berlin).
    const third = await limiter.limit(tokens(key));
    expect(third).toMatchObject({ allowed: false, remaining: 2_000, reset: MARCH.end });
    expect(third.retryAfterMs).toBe(MARCH.end - clock.now());
    // r1 used 1 500: 2 500 given back, and the third fits.
    expect(await limiter.settle(r1, 1_500)).toEqual({
      status: "settled",
      policies: ["tokens-month"],
      charged: [-2_500],
    });
    const r3 = await admit(tokens(key));
    // r2 used 6 000: 2 000 more, charged past the limit (1 500 + 6 000 + 4 000 = 11 500).
    expect(await limiter.settle(r2, 6_000)).toMatchObject({ status: "settled", charged: [2_000] });
    // Again: nothing written, whatever the units.
    expect(await limiter.settle(r2, 10)).toEqual({
      status: "already-settled",
      policies: ["tokens-month"],
      charged: [0],
    });
    const stored = storageKey(prefix, "tokens-month", key, "calendar");
    expect(await redis.get<string>(stored)).toMatch(/:11500$/);
    const over = await limiter.limit(tokens(key, 1));
    expect(over).toMatchObject({ allowed: false, remaining: 0, reset: MARCH.end });
    // April's period: a fresh budget, and March's r3 can no longer charge anything there.
    clock.set(MARCH.end);
    expect(await limiter.settle(r3, 0)).toEqual({
      status: "unknown",
      policies: ["tokens-month"],
      charged: [0],
    });
    expect(await limiter.limit(tokens(key))).toMatchObject({ allowed: true, remaining: 6_000 });
    await redis.del(stored);
  });

  it("a settle in its period's last ms charges; its gate lives until that period ends", async () => {
    const key = newKey();
    clock.set(MARCH.end - 1_000);
    const receipt = await admit(tokens(key));
    clock.set(MARCH.end - 1);
    expect(await limiter.settle(receipt, 100)).toMatchObject({
      status: "settled",
      charged: [-3_900],
    });
    const gate = settleGateKey(
      storageKey(prefix, "tokens-month", key, "calendar"),
      (receipt as { memberId: string }).memberId,
    );
    // Caller's clock: the period's end (1 ms away) plus its 1 s grace, no longer.
    const ttl = await redis.pttl(gate);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_001);
  });

  it("a settle more than a day after its admission charges nothing: the reservation stands", async () => {
    const key = newKey();
    clock.set(MARCH.start + 1_000);
    const late = await admit(tokens(key));
    const prompt = await admit(tokens(key));
    clock.advance(MAX_SETTLE_AGE_MS - 1);
    expect(await limiter.settle(prompt, 0)).toMatchObject({ status: "settled", charged: [-4_000] });
    clock.advance(1);
    expect(await limiter.settle(late, 0)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await limiter.limit(tokens(key, 1))).toMatchObject({ remaining: 10_000 - 4_000 - 1 });
  });

  it("counts past 10^14 units exactly (Lua's doubles, written as integers)", async () => {
    const key = newKey();
    clock.set(MARCH.start + 5_000);
    const limit = 1_000_000_000_000;
    const receipts: RefundReceipt[] = [];
    for (let i = 0; i < 120; i++) receipts.push(await admit(tokens(key, 1, limit)));
    // Each used 10^12: 120 × (10^12 − 1) more, far past the limit (Lua's tostring would print
    // 1.2e+14, which no reader parses: a fresh budget).
    for (const receipt of receipts) {
      expect((await limiter.settle(receipt, limit)).charged).toEqual([limit - 1]);
    }
    const stored = storageKey(prefix, "tokens-month", key, "calendar");
    expect(await redis.get<string>(stored)).toMatch(/:120000000000000$/);
    expect(await limiter.limit(tokens(key, 1, limit))).toMatchObject({
      allowed: false,
      remaining: 0,
    });
  });
});

describe("a customer's own monthly token budget (an override)", () => {
  it("takes a usage rule's limit in units; a plain calendar rule's stays within 100 000", async () => {
    const key = newKey();
    clock.set(MARCH.start + 10_000);
    const own = { limit: 20_000_000, algorithm: "calendar" as const };
    expect(await limiter.overrides.set("tokens-month", key, own)).toMatchObject({
      ok: false,
      field: "limit",
    });
    expect(await limiter.overrides.set("tokens-month", key, { ...own, usage: true })).toMatchObject(
      { ok: true },
    );
    const decided = await limiter.limit({ ...tokens(key), overrides: true });
    expect(decided).toMatchObject({
      allowed: true,
      limit: 20_000_000,
      remaining: 20_000_000 - 4_000,
    });
    await limiter.overrides.remove("tokens-month", key);
  });
});

describe("a usage rule on a fixed window", () => {
  const perMinute = (key: string, cost = 50): LimitRequest => ({
    policy: "tokens-minute",
    key,
    limit: 100,
    windowMs: 60_000,
    cost,
    algorithm: "fixed-window",
    usage: true,
  });

  it("settles in the window it was counted in, and charges nothing once that window is over", async () => {
    const key = newKey();
    clock.set(Date.parse("2026-03-20T12:00:10Z"));
    const a = await admit(perMinute(key));
    const b = await admit(perMinute(key));
    expect(await limiter.limit(perMinute(key, 1))).toMatchObject({ allowed: false });
    expect(await limiter.settle(a, 20)).toMatchObject({ status: "settled", charged: [-30] });
    expect(await limiter.limit(perMinute(key, 30))).toMatchObject({ allowed: true, remaining: 0 });
    clock.set(Date.parse("2026-03-20T12:01:00Z"));
    expect(await limiter.settle(b, 0)).toMatchObject({ status: "unknown", charged: [0] });
    expect(await limiter.limit(perMinute(key, 1))).toMatchObject({ allowed: true, remaining: 99 });
  });

  it("settles a request's weighted log and its fixed window in one call, all or nothing", async () => {
    const key = newKey();
    clock.set(Date.parse("2026-03-20T12:05:00Z"));
    const log: LimitRequest = {
      ...perMinute(key),
      policy: "tokens-log",
      algorithm: "sliding-log-weighted",
    };
    const receipt = await admit(perMinute(key));
    const both = await limiter.limitAll([log, { ...perMinute(key), policy: "tokens-w2" }]);
    expect(both.allowed).toBe(true);
    expect(await limiter.settle(both.receipt as RefundReceipt, 80)).toEqual({
      status: "settled",
      policies: ["tokens-log", "tokens-w2"],
      charged: [30, 30],
    });
    expect(await limiter.settle(both.receipt as RefundReceipt, 80)).toMatchObject({
      status: "already-settled",
      charged: [0, 0],
    });
    expect((await limiter.settle(receipt, 50)).charged).toEqual([0]);
  });

  it("takes each rule's own units: a period and a log, read differently, in one settle", async () => {
    const key = newKey();
    clock.set(Date.parse("2026-03-20T12:10:00Z"));
    const log: LimitRequest = {
      ...perMinute(key),
      policy: "tokens-log",
      algorithm: "sliding-log-weighted",
    };
    const decided = await limiter.limitAll([log, tokens(key)]);
    expect(decided.allowed).toBe(true);
    const units = { "tokens-log": 70, "tokens-month": 1_000 };
    expect(await limiter.settle(decided.receipt as RefundReceipt, units)).toEqual({
      status: "settled",
      policies: ["tokens-log", "tokens-month"],
      charged: [20, -3_000],
    });
  });
});
