import { describe, expect, it } from "vitest";
import type { CalendarPeriod } from "../../../src/limiter/calendar-period";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("period-anchors");
const at = (iso: string) => Date.parse(iso);

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

const month: CalendarPeriod = { unit: "month", timezone: "America/New_York" };
const quota = (key: string, limit: number): LimitRequest => ({
  policy: "billing",
  key,
  limit,
  windowMs: 0,
  algorithm: "calendar",
  period: month,
  overrides: true,
});

describe("a customer's own anchor and budget through the plans", () => {
  it("its periods start on its billing day in the rule's zone, with its budget; removed, the rule's again", async () => {
    const a = isolate("2026-03-10T12:00:00Z");
    const b = isolate("2026-03-10T12:00:00Z");
    const key = `customer-${crypto.randomUUID()}`;
    // The rule's month: March 1 at midnight in New York (EST, -05:00).
    expect(await b.limiter.limit(quota(key, 2))).toMatchObject({
      allowed: true,
      remaining: 1,
      reset: at("2026-04-01T04:00:00Z"),
    });
    // Billing on the 15th at 09:00 New York time, 3 a period.
    const set = await a.limiter.overrides.set("billing", key, {
      limit: 3,
      algorithm: "calendar",
      anchor: "2026-01-15T09:00:00-05:00",
    });
    expect(set).toEqual({ ok: true, existed: false });
    // b computed its periods with the rule's anchor: the script says so, b asks again, counts
    // once. The unit counted under the rule's month since the billing period began counts in it
    // too (an anchor change never hands out a fresh budget mid-period): 2 of 3.
    const first = await b.limiter.limit(quota(key, 2));
    expect(first).toMatchObject({
      allowed: true,
      limit: 3,
      remaining: 1,
      reset: at("2026-03-15T13:00:00Z"), // 09:00 EDT
    });
    const redisKey = storageKey(prefix, "billing", key, "calendar");
    expect(await redis.get<string>(redisKey)).toBe(
      `${at("2026-02-15T14:00:00Z")}:${at("2026-03-10T12:00:00Z")}:2`,
    );
    expect(await b.limiter.limit(quota(key, 2))).toMatchObject({ allowed: true, remaining: 0 });
    const denied = await b.limiter.limit(quota(key, 2));
    expect(denied).toMatchObject({ allowed: false, reset: at("2026-03-15T13:00:00Z") });
    b.set("2026-03-15T13:00:00Z");
    expect(await b.limiter.limit(quota(key, 2))).toMatchObject({
      allowed: true,
      remaining: 2,
      reset: at("2026-04-15T13:00:00Z"),
    });
    const listed = await a.limiter.plans.list({ what: "overrides" });
    expect(listed.entries).toContainEqual(
      expect.objectContaining({ policy: "billing", limit: 3, anchor: at("2026-01-15T14:00:00Z") }),
    );
    expect(await a.limiter.overrides.remove("billing", key)).toEqual({ ok: true, existed: true });
    b.set("2026-03-20T00:00:00Z");
    // The rule's own month and limit again: the unit counted since March 15 is in it (1 of 2).
    expect(await b.limiter.limit(quota(key, 2))).toMatchObject({
      allowed: true,
      limit: 2,
      remaining: 0,
      reset: at("2026-04-01T04:00:00Z"),
    });
  });

  it("an anchor is refused for a policy that is not a calendar one, or when it is not an instant", async () => {
    const a = isolate("2026-03-10T12:00:00Z");
    expect(
      await a.limiter.overrides.set("billing", "k", {
        limit: 3,
        algorithm: "fixed-window",
        anchor: "2026-01-15T09:00:00Z",
      }),
    ).toMatchObject({ ok: false, field: "anchor" });
    expect(
      await a.limiter.overrides.set("billing", "k", {
        limit: 3,
        algorithm: "calendar",
        anchor: "the 15th",
      }),
    ).toMatchObject({ ok: false, field: "anchor" });
    expect((await a.limiter.plans.list({ what: "overrides" })).entries).not.toContainEqual(
      expect.objectContaining({ value: "k" }),
    );
  });
});
