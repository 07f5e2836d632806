import { describe, expect, it } from "vitest";
import { evaluatePolicy } from "../../../../src/store/evaluate";
import { storageKey } from "../../../../src/store/keys";
import { scopedPrefix, testRedis, testStore } from "../../../support/worker/redis";

// The calendar fragment on its own: the script counts in whichever of the starts it is sent holds
// the store's now, so an isolate whose clock is off by less than a period still counts in the
// store's period; and none that holds it is an error, never a count in another period.
const prefix = scopedPrefix("calendar-lua");
const store = testStore(5_000);
const redis = testRedis();
const DAY = 86_400_000;
const D = Date.parse("2026-06-10T00:00:00Z");
// Days: the one before D, D, and the two after: as the limiter sends them around D.
const starts = [D - DAY, D, D + DAY, D + 2 * DAY, D + 3 * DAY];

let member = 0;
function quota(limit: number) {
  const redisKey = storageKey(prefix, `cal.${crypto.randomUUID()}`, "client", "calendar");
  const at = (now: number, cost = 1, periodStarts: readonly number[] = starts) =>
    evaluatePolicy(store, {
      redisKey,
      algorithm: "calendar",
      limit,
      windowMs: 25 * 3_600_000,
      cost,
      periodStarts,
      memberId: `c${member++}`,
      now,
    });
  return { redisKey, at };
}

describe("the calendar script", () => {
  it("counts in the period of the starts sent that holds now, whichever it is", async () => {
    const q = quota(2);
    // The store is a day ahead of the isolate that computed the starts around D.
    const ahead = D + DAY + 5;
    expect(await q.at(ahead, 2)).toMatchObject({ allowed: true, remaining: 0, reset: D + 2 * DAY });
    expect(await q.at(ahead + 1)).toMatchObject({
      allowed: false,
      reset: D + 2 * DAY,
      retryAfterMs: DAY - 6,
    });
    // The next day: fresh.
    expect(await q.at(D + 2 * DAY)).toMatchObject({ allowed: true, remaining: 1 });
  });

  it("a slower caller clock across a boundary counts in the faster one's period, never resets it", async () => {
    const q = quota(5);
    const fast = D + 2; // already in the day that starts at D
    const slow = D - 3; // still in the day before
    for (let i = 0; i < 5; i++) expect((await q.at(fast)).allowed).toBe(true);
    expect(await q.at(slow)).toMatchObject({ allowed: false, reset: D + DAY });
    let admitted = 0;
    for (let i = 0; i < 10; i++) if ((await q.at(i % 2 ? fast : slow)).allowed) admitted++;
    expect(admitted).toBe(0);
    expect(await redis.get<string>(q.redisKey)).toBe(`${D}:${fast}:5`);
  });

  it("a cost above what is left is denied whole and counts nothing", async () => {
    const q = quota(3);
    expect((await q.at(D + 10, 2)).allowed).toBe(true);
    expect(await q.at(D + 11, 2)).toMatchObject({ allowed: false, remaining: 1 });
    expect(await redis.get<string>(q.redisKey)).toBe(`${D}:${D + 10}:2`);
  });

  it("a now outside every period sent is a store error, and nothing is written", async () => {
    const q = quota(5);
    await expect(q.at(D + 10 * DAY)).rejects.toThrow(/outside the periods sent/);
    expect(await redis.exists(q.redisKey)).toBe(0);
  });

  it("a calendar policy without its starts is refused before Redis is asked", async () => {
    const q = quota(5);
    await expect(q.at(D, 1, [])).rejects.toThrow(/period starts/);
    await expect(q.at(D, 1, [D + DAY, D])).rejects.toThrow(/period starts/);
  });
});
