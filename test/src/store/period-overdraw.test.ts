// The bound reserve-then-settle keeps in a calendar period and a fixed window (lua/settle-driver.lua.ts,
// docs/usage.md "How exact"): admissions and settles racing on one period's count (each
// instant's events sent at once), on a fake clock, over six UTC days. With a covering
// reservation no day is charged more than the limit; with a smaller one, a day is over by at
// most what the requests in flight when its last admission was decided used beyond their
// reservations. Each request is charged exactly what it used if settled within its day, its
// reservation if its settle came after the day ended (which answers "unknown").
import { describe, expect, it } from "vitest";
import { type CalendarPeriod, periodAt, periodStarts } from "../../../src/limiter/calendar-period";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { settle } from "../../../src/store/settle";
import { prng } from "../../support/worker/prng";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const T = Date.parse("2026-06-01T00:00:00Z");
const DAY = 86_400_000;
const SLOT = 600_000;
const LIMIT = 4_500;
const redis = testRedis();
const prefix = scopedPrefix("period-bound");
const store = testStore(10_000);
const period: CalendarPeriod = { unit: "day", timezone: "UTC" };

interface Req {
  id: string;
  at: number;
  ends: number;
  reserve: number;
  used: number;
  admitted?: boolean;
  admittedStep?: number;
  settledStep?: number;
  /** Settled within its day (else its reservation stands). */
  charged?: boolean;
}

/** 240 requests over 6 days at about twice the budget, in 10-minute slots, 10 min to 4 h each. */
function workload(seed: number, reserve: (used: number) => number): Req[] {
  const random = prng(seed);
  return Array.from({ length: 240 }, (_, i) => {
    const at = T + Math.floor(random() * 6 * 144) * SLOT;
    const used = 50 + Math.floor(random() * 351);
    const ends = at + (1 + Math.floor(random() * 24)) * SLOT;
    return { id: `p${seed}-${i}`, at, ends, reserve: reserve(used), used };
  });
}

const dayOf = (t: number) => periodAt(period, t).start;

/** Plays the workload; answers each day's count as stored when the day ended. */
async function play(
  name: string,
  requests: Req[],
  algorithm: "calendar" | "fixed-window",
): Promise<Map<number, number>> {
  const policy: StorePolicy = {
    redisKey: storageKey(prefix, name, "client", algorithm),
    algorithm,
    limit: LIMIT,
    windowMs: DAY,
    cost: 1,
    usage: true,
  };
  const counts = new Map<number, number>();
  const readDay = async (day: number) => {
    const value = (await redis.get<string>(policy.redisKey)) ?? "";
    const [first = Number.NaN, , count] = value.split(":").map(Number);
    // A period's value starts with its start; a window's with its last admission's time.
    if (algorithm === "calendar" ? first === day : dayOf(first) === day) {
      counts.set(day, count ?? 0);
    }
  };
  const steps = [...new Set(requests.flatMap((r) => [r.at, r.ends]))].sort((a, b) => a - b);
  for (const [step, now] of steps.entries()) {
    const previous = steps[step - 1];
    if (previous !== undefined && dayOf(previous) !== dayOf(now)) await readDay(dayOf(previous));
    const starts = periodStarts(period, now, 1, 2);
    await Promise.all([
      ...requests
        .filter((r) => r.ends === now && r.admitted)
        .map(async (r) => {
          r.settledStep = step;
          const answer = await settle(store, {
            policies: [{ ...policy, cost: r.reserve, periodStarts: starts }],
            memberId: r.id,
            units: [r.used],
            at: r.at,
            now,
          });
          r.charged = dayOf(r.at) === dayOf(now);
          expect(answer).toEqual(
            r.charged
              ? { status: "settled", charged: [r.used - r.reserve] }
              : { status: "unknown", charged: [0] },
          );
        }),
      ...requests
        .filter((r) => r.at === now)
        .map(async (r) => {
          const decided = await evaluatePolicy(store, {
            ...policy,
            periodStarts: starts,
            cost: r.reserve,
            memberId: r.id,
            now,
          });
          r.admitted = decided.allowed;
          r.admittedStep = step;
        }),
    ]);
  }
  await readDay(dayOf(steps.at(-1) as number));
  await redis.del(policy.redisKey);
  return counts;
}

/** Per day: the units charged in the model, and the documented bound's excess. */
function days(requests: Req[]): { day: number; charged: number; bound: number }[] {
  const admitted = requests.filter((r) => r.admitted);
  return [...new Set(admitted.map((r) => dayOf(r.at)))].map((day) => {
    const inside = admitted.filter((r) => dayOf(r.at) === day);
    const charged = inside.reduce((sum, r) => sum + (r.charged ? r.used : r.reserve), 0);
    const k = Math.max(...inside.map((r) => r.admittedStep ?? 0));
    // In flight when the day's last admission was decided (a settle racing it counts as in
    // flight: the bound is then an upper one), and charged beyond its reservation.
    const bound = inside
      .filter((r) => r.charged && (r.settledStep ?? Infinity) >= k)
      .reduce((sum, r) => sum + Math.max(0, r.used - r.reserve), 0);
    return { day, charged, bound };
  });
}

// A UTC day as a period, and as a fixed window of a day (aligned to the epoch: the same days).
for (const algorithm of ["calendar", "fixed-window"] as const) {
  describe(`reserve, then settle: the bound on every ${algorithm} day`, () => {
    it("with a covering reservation, no day is charged over the limit", async () => {
      const requests = workload(1, () => 400);
      const counts = await play(`covering-${algorithm}`, requests, algorithm);
      const seen = days(requests);
      // Exact: each day's count is what its requests were charged.
      for (const { day, charged } of seen) expect(counts.get(day)).toBe(charged);
      const fullest = Math.max(...seen.map((d) => d.charged));
      expect(fullest).toBeLessThanOrEqual(LIMIT);
      // Not vacuous: denials, a well-used budget, and settles after their day ended.
      expect(requests.some((r) => r.admitted === false)).toBe(true);
      expect(fullest).toBeGreaterThan(LIMIT / 2);
      expect(requests.some((r) => r.admitted && r.charged === false)).toBe(true);
    });

    it("with a smaller reservation, over by at most the in-flight requests' excess", async () => {
      const requests = workload(11, () => 100);
      const counts = await play(`small-${algorithm}`, requests, algorithm);
      const seen = days(requests);
      for (const { day, charged, bound } of seen) {
        expect(counts.get(day)).toBe(charged);
        expect(charged).toBeLessThanOrEqual(LIMIT + bound);
      }
      // Not vacuous: some day went over the limit.
      expect(seen.some((d) => d.charged > LIMIT)).toBe(true);
    });
  });
}
