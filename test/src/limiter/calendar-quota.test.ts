import { describe, expect, it } from "vitest";
import type { CalendarPeriod } from "../../../src/limiter/calendar-period";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { shardPrefix, shardUrls } from "../../support/worker/shard-stores";

const redis = testRedis();
const prefix = scopedPrefix("calendar");
const at = (iso: string) => Date.parse(iso);

/** One isolate on a clock we set: the store decides on it (the caller clock). */
function isolate(start: string) {
  const clock = { t: at(start) };
  const limiter = createLimiter({
    store: testStore(),
    prefix,
    clock: "caller",
    now: () => clock.t,
  });
  return { limiter, set: (iso: string) => (clock.t = at(iso)) };
}

const quota = (key: string, limit: number, period: CalendarPeriod, cost = 1): LimitRequest => ({
  policy: "quota",
  key,
  limit,
  windowMs: 0,
  algorithm: "calendar",
  period,
  cost,
});

const newKey = () => `k-${crypto.randomUUID()}`;

describe("a calendar quota decided by the store", () => {
  it("admits up to the limit, then denies until the next period's start, and admits afresh there", async () => {
    const a = isolate("2026-02-27T10:00:00Z");
    const key = newKey();
    const month: CalendarPeriod = { unit: "month", timezone: "UTC" };
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await a.limiter.limit(quota(key, 3, month)));
    expect(decisions.map((d) => [d.allowed, d.remaining])).toEqual([
      [true, 2],
      [true, 1],
      [true, 0],
      [false, 0],
    ]);
    const boundary = at("2026-03-01T00:00:00Z");
    // (The third admission left nothing: the denial cache answers, with the store's reset.)
    expect(decisions[3]).toMatchObject({ reset: boundary, source: "cache", algorithm: "calendar" });
    expect(decisions[3]?.retryAfterMs).toBe(boundary - at("2026-02-27T10:00:00Z"));
    // A millisecond before the boundary: still February's quota (another isolate, no cache).
    const b = isolate("2026-02-28T23:59:59.999Z");
    expect(await b.limiter.limit(quota(key, 3, month))).toMatchObject({
      allowed: false,
      retryAfterMs: 1,
    });
    b.set("2026-03-01T00:00:00Z");
    expect(await b.limiter.limit(quota(key, 3, month))).toMatchObject({
      allowed: true,
      remaining: 2,
      reset: at("2026-04-01T00:00:00Z"),
    });
  });

  for (const [label, last, next] of [
    ["28 days (Feb 2026)", "2026-02-28T23:59:59.999Z", "2026-03-01T00:00:00Z"],
    ["29 days (Feb 2028)", "2028-02-29T23:59:59.999Z", "2028-03-01T00:00:00Z"],
    ["30 days (Apr 2026)", "2026-04-30T23:59:59.999Z", "2026-05-01T00:00:00Z"],
    ["31 days (Dec 2026)", "2026-12-31T23:59:59.999Z", "2027-01-01T00:00:00Z"],
  ] as const) {
    it(`a month of ${label}: its last ms counts in it, its end is the next month's first instant`, async () => {
      const a = isolate(last);
      const key = newKey();
      const month: CalendarPeriod = { unit: "month", timezone: "UTC" };
      expect(await a.limiter.limit(quota(key, 1, month))).toMatchObject({
        allowed: true,
        reset: at(next),
      });
      expect(await a.limiter.limit(quota(key, 1, month))).toMatchObject({
        allowed: false,
        retryAfterMs: 1,
      });
      a.set(next);
      expect(await a.limiter.limit(quota(key, 1, month))).toMatchObject({ allowed: true });
    });
  }

  it("an anchor on the 31st: February's period starts on the 28th at the anchor's time", async () => {
    const a = isolate("2026-02-27T12:00:00Z");
    const key = newKey();
    const billing: CalendarPeriod = {
      unit: "month",
      timezone: "UTC",
      anchor: at("2026-01-31T09:00:00Z"),
    };
    expect(await a.limiter.limit(quota(key, 2, billing, 2))).toMatchObject({
      allowed: true,
      reset: at("2026-02-28T09:00:00Z"),
    });
    const denied = await a.limiter.limit(quota(key, 2, billing));
    expect(denied).toMatchObject({ allowed: false, reset: at("2026-02-28T09:00:00Z") });
    expect(denied.retryAfterMs).toBe(21 * 3_600_000);
    a.set("2026-02-28T09:00:00Z");
    expect(await a.limiter.limit(quota(key, 2, billing))).toMatchObject({
      allowed: true,
      remaining: 1,
      reset: at("2026-03-31T09:00:00Z"),
    });
  });

  it("a day across New York's fall-back change lasts 25 hours: denied until local midnight", async () => {
    const a = isolate("2026-11-01T04:30:00Z"); // 00:30 EDT
    const key = newKey();
    const day: CalendarPeriod = { unit: "day", timezone: "America/New_York" };
    expect(await a.limiter.limit(quota(key, 1, day))).toMatchObject({
      allowed: true,
      reset: at("2026-11-02T05:00:00Z"), // midnight EST
    });
    a.set("2026-11-02T04:59:59.999Z"); // 23:59:59.999 EST: 24.5 hours later, the same day
    expect(await a.limiter.limit(quota(key, 1, day))).toMatchObject({
      allowed: false,
      retryAfterMs: 1,
    });
  });

  it("the store keeps one short value per key, living to the period's end plus a margin", async () => {
    const a = isolate("2026-12-31T23:00:00Z");
    const key = newKey();
    await a.limiter.limit(quota(key, 5, { unit: "month", timezone: "UTC" }, 2));
    const redisKey = storageKey(prefix, "quota", key, "calendar");
    expect(await redis.get<string>(redisKey)).toBe(
      `${at("2026-12-01T00:00:00Z")}:${at("2026-12-31T23:00:00Z")}:2`,
    );
    const ttl = await redis.pttl(redisKey);
    expect(ttl).toBeGreaterThan(3_600_000);
    // The margin, plus the caller clock's grace for isolates whose clocks differ.
    expect(ttl).toBeLessThanOrEqual(3_600_000 + 60_000 + 1_000);
  });

  it("a refund gives the units back within the period they were counted in", async () => {
    const a = isolate("2026-06-10T00:00:00Z");
    const key = newKey();
    const month: CalendarPeriod = { unit: "month", timezone: "UTC" };
    const first = await a.limiter.limitAll([quota(key, 2, month, 2)]);
    expect(first.allowed).toBe(true);
    expect((await a.limiter.limitAll([quota(key, 2, month)])).allowed).toBe(false);
    const refund = await a.limiter.refund(first.receipt as NonNullable<typeof first.receipt>);
    expect(refund).toMatchObject({ refunded: true, units: [2] });
    // Another isolate (no cached denial) sees the units back.
    const b = isolate("2026-06-10T00:00:01Z");
    expect(await b.limiter.limit(quota(key, 2, month))).toMatchObject({
      allowed: true,
      remaining: 1,
    });
  });

  it("a request id's retry is replayed; the same id asking another period is a conflict", async () => {
    const a = isolate("2026-06-10T00:00:00Z");
    const key = newKey();
    const utc: CalendarPeriod = { unit: "day", timezone: "UTC" };
    const requestId = `r-${crypto.randomUUID()}`;
    expect((await a.limiter.limitAll([quota(key, 5, utc)], { requestId })).allowed).toBe(true);
    const retry = await a.limiter.limitAll([quota(key, 5, utc)], { requestId });
    expect(retry).toMatchObject({ allowed: true, replayed: true });
    const tokyo = await a.limiter.limitAll([quota(key, 5, { ...utc, timezone: "Asia/Tokyo" })], {
      requestId,
    });
    expect(tokyo).toMatchObject({
      allowed: false,
      conflict: { field: "windowMs", recorded: "day@UTC@", asked: "day@Asia/Tokyo@" },
    });
    const redisKey = storageKey(prefix, "quota", key, "calendar");
    expect(await redis.get<string>(redisKey)).toMatch(/:1$/);
  });

  it("on the Redis clock: the period that holds the store's now, reset at the next UTC midnight", async () => {
    const limiter = createLimiter({ store: testStore(), prefix });
    const key = newKey();
    const decision = await limiter.limit(quota(key, 1, { unit: "day", timezone: "UTC" }));
    expect(decision.allowed).toBe(true);
    const midnight = Math.floor(decision.reset / 86_400_000) * 86_400_000;
    expect(decision.reset).toBe(midnight);
    expect(decision.reset - decision.resetAfterMs).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(decision.reset - 86_400_000).toBeLessThanOrEqual(Date.now() + 5_000);
  });

  it("a calendar request without a period, or a period without the algorithm, is the caller's error", async () => {
    const a = isolate("2026-06-10T00:00:00Z");
    const key = newKey();
    await expect(
      a.limiter.limit({ policy: "quota", key, limit: 1, windowMs: 0, algorithm: "calendar" }),
    ).rejects.toThrow(/period is required/);
    await expect(
      a.limiter.limit({
        policy: "quota",
        key,
        limit: 1,
        windowMs: 60_000,
        period: { unit: "day", timezone: "Nowhere/Town" },
        algorithm: "calendar",
      }),
    ).rejects.toThrow(/timezone/);
    expect(await redis.exists(storageKey(prefix, "quota", key, "calendar"))).toBe(0);
  });
});

describe("a calendar quota over shards", () => {
  it("each key counted on its shard, to its limit, with the period's reset", async () => {
    const shardsPrefix = shardPrefix("calendar-shards");
    const clock = { t: at("2026-05-31T23:59:00Z") };
    const limiter = createLimiter({
      store: shardUrls().map((url) => storeAt(url, 2_000)),
      prefix: shardsPrefix,
      clock: "caller",
      now: () => clock.t,
    });
    const day: CalendarPeriod = { unit: "day", timezone: "UTC" };
    const shards = new Set<string | undefined>();
    // Keys are random: six of them land on one shard now and then (1 in 243 over three),
    // so keys are added until two shards have been seen (at most 40: never all on one).
    for (let i = 0; i < 40 && (i < 6 || shards.size < 2); i++) {
      const key = newKey();
      const decisions = [];
      for (let n = 0; n < 3; n++) decisions.push(await limiter.limit(quota(key, 2, day)));
      expect(decisions.map((d) => d.allowed)).toEqual([true, true, false]);
      expect(decisions[2]).toMatchObject({
        reset: at("2026-06-01T00:00:00Z"),
        retryAfterMs: 60_000,
      });
      shards.add(decisions[0]?.shard);
    }
    expect(shards.size).toBeGreaterThan(1);
  });
});
