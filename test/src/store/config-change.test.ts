import { describe, expect, it } from "vitest";
import { RATE_ALGORITHMS as ALGORITHMS, type Algorithm } from "../../../src/store/algorithm";
import { evaluatePolicy, type PolicyAnswer } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { refund } from "../../../src/store/refund";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// A rule whose window or limit changes while clients are counted under it: the new version reads
// what the old one stored (same policy, same algorithm, same key), and during a rolling deploy both
// versions write the same key, one after the other. Time is placed with the caller's clock, except
// in the last test (the Redis clock, as deployed).
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;
// Aligned to a week, hence to a day: window starts are easy to name.
const T0 = Math.ceil(1_700_000_000_000 / WEEK) * WEEK;
const redis = testRedis();
const prefix = scopedPrefix("config-change");
const store = testStore(10_000);

let member = 0;
let names = 0;

interface Version {
  key: string;
  algorithm: Algorithm;
  limit: number;
  windowMs: number;
  at(now: number | undefined, cost?: number): Promise<PolicyAnswer>;
}

/**
 * One version of a rule; versions sharing `name` share a key. `longestMs`: the longest window any
 * version of the rule has (the token bucket's bound depends on it, see `bound`).
 */
function version(
  name: string,
  algorithm: Algorithm,
  limit: number,
  windowMs: number,
  longestMs = windowMs,
): Version {
  const key = storageKey(prefix, name, "client", algorithm);
  const at = async (now: number | undefined, cost = 1) => {
    const result = await evaluatePolicy(store, {
      redisKey: key,
      algorithm,
      limit,
      windowMs,
      cost,
      memberId: `m${member++}`,
      now,
    });
    expectBounded(result, { algorithm, limit, windowMs, longestMs }, cost);
    return result;
  };
  return { key, algorithm, limit, windowMs, at };
}

/** Two versions `[limit, window]` of one rule (one key), and the rule's name. */
function rule(algorithm: Algorithm, a: [number, number], b: [number, number]) {
  const name = `r${names++}`;
  const longest = Math.max(a[1], b[1]);
  return [
    version(name, algorithm, a[0], a[1], longest),
    version(name, algorithm, b[0], b[1], longest),
    name,
  ] as const;
}

/**
 * The longest a version may ask a client to wait for `units`: its own window, except
 * - the sliding counter: window × (1 + units/limit), its inherent bound (a full previous window
 *   weighs until that far into the next);
 * - the token bucket, reading a bucket another window wrote: the share of the bucket `units`
 *   take, of that window (units × other window / limit), since that bucket drains at its writer's
 *   pace until this version writes — never more than the longest window (units ≤ limit).
 * Stricter than the requirement, "never longer than the longest window configured", which every
 * answer is also held to.
 */
function bound(
  v: { algorithm: Algorithm; limit: number; windowMs: number; longestMs: number },
  units: number,
): number {
  const { algorithm, limit, windowMs, longestMs } = v;
  if (algorithm === "sliding-counter") return windowMs + Math.ceil((units * windowMs) / limit);
  if (algorithm === "token-bucket")
    return Math.max(windowMs, Math.ceil((units * longestMs) / limit));
  return windowMs;
}

function expectBounded(
  r: PolicyAnswer,
  v: { algorithm: Algorithm; limit: number; windowMs: number; longestMs: number },
  cost: number,
) {
  const context = `${v.algorithm} limit ${v.limit} window ${v.windowMs}: ${JSON.stringify(r)}`;
  expect(r.remaining, context).toBeGreaterThanOrEqual(0);
  expect(r.remaining, context).toBeLessThanOrEqual(v.limit);
  expect(r.reset, context).toBeGreaterThanOrEqual(r.now);
  if (r.allowed) {
    expect(r.retryAfterMs, context).toBe(0);
    if (r.remaining < v.limit) {
      expect(r.reset - r.now, context).toBeLessThanOrEqual(bound(v, r.remaining + 1));
    }
  } else {
    expect(r.retryAfterMs, context).toBe(r.reset - r.now);
    expect(r.retryAfterMs, context).toBeGreaterThan(0);
    expect(r.retryAfterMs, context).toBeLessThanOrEqual(bound(v, cost));
    if (cost <= v.limit && v.algorithm !== "sliding-counter") {
      expect(r.retryAfterMs, context).toBeLessThanOrEqual(v.longestMs);
    }
  }
}

/** Asks until denied (at most `max` times); returns how many were admitted. */
async function drain(v: Version, now: number | undefined, max = 50): Promise<number> {
  for (let i = 0; i < max; i++) if (!(await v.at(now)).allowed) return i;
  return max;
}

/** A denied client that waits exactly what it was told is admitted then (the wait is honest). */
async function honoursWait(v: Version, denied: PolicyAnswer) {
  expect(denied.allowed).toBe(false);
  expect((await v.at(denied.reset)).allowed, `${v.algorithm} at the promised reset`).toBe(true);
}

describe.each(ALGORITHMS)("%s: a rule whose window or limit changes", (algorithm) => {
  it("window 1d → 7d: the 7-day version keeps the day's count and waits at most its window", async () => {
    const [day, week] = rule(algorithm, [10, DAY], [10, WEEK]);
    const t = T0 + 2 * DAY + HOUR;
    expect(await drain(day, t)).toBe(10);
    // The new version, an hour later, the same day: what the day admitted still counts (the
    // token bucket carries the share of its bucket in use: empty stays empty).
    const first = await week.at(t + HOUR);
    expect(first.allowed).toBe(false);
    await honoursWait(week, first);
    // Days later, still bounded by its own window.
    for (let d = 3; d < 9; d++) await week.at(T0 + d * DAY + 5 * HOUR);
  });

  it("window 7d → 1d: the 1-day version counts the week's admissions today, and only today", async () => {
    const [week, day] = rule(algorithm, [10, WEEK], [10, DAY]);
    expect(await drain(week, T0 + HOUR)).toBe(10);
    // The same day, under the new version: conservative (the week's admissions may all be today's),
    // never a fresh budget mid-window, never a wait past its own window.
    const denied = await day.at(T0 + 2 * HOUR);
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(DAY + DAY / 10);
    // The client that honours it is admitted then, and is not locked out for the old week.
    await honoursWait(day, denied);
    expect(await drain(day, T0 + 3 * DAY)).toBeGreaterThan(0);
  });

  it("limit 10 → 3 → 10: remaining never negative, waits bounded, counts kept", async () => {
    const [ten, three] = rule(algorithm, [10, DAY], [3, DAY]);
    const t = T0 + 4 * HOUR;
    expect(await drain(ten, t, 8)).toBe(8);
    expect(await three.at(t + HOUR)).toMatchObject({ allowed: false, remaining: 0 });
    // Back to 10: the 8 are not forgotten (the lower limit did not rewrite them away).
    expect(await ten.at(t + HOUR)).toMatchObject({ allowed: true, remaining: 1 });
    const denied = await three.at(t + 2 * HOUR);
    expect(denied).toMatchObject({ allowed: false, remaining: 0 });
    await honoursWait(three, denied);
  });

  it("two versions at once (1d and 7d, alternating over 10 days): every wait bounded", async () => {
    const [day, week] = rule(algorithm, [10, DAY], [30, WEEK]);
    let admitted = 0;
    for (let i = 0; i < 240; i++) {
      // One request an hour, alternating, plus a burst every 3rd day.
      const t = T0 + 3 * DAY + i * HOUR + (i % 7) * 60_000;
      const v = i % 2 === 0 ? day : week;
      const cost = i % 72 === 0 ? 5 : 1;
      if ((await v.at(t, cost)).allowed) admitted++;
    }
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThan(240);
  });
});

describe("values written before this change (rollout)", () => {
  it("reads the old `<window index>:…` formats as written with this rule's window", async () => {
    const t = T0 + 5 * HOUR;
    const fixed = version("old-fixed", "fixed-window", 5, DAY);
    await redis.set(fixed.key, `${Math.floor(t / DAY)}:5`);
    expect(await fixed.at(t)).toMatchObject({ allowed: false, reset: T0 + DAY });
    const counter = version("old-counter", "sliding-counter", 5, DAY);
    await redis.set(counter.key, `${Math.floor(t / DAY)}:5:0`);
    expect((await counter.at(t)).allowed).toBe(false);
    // An old index of another window (7 days: far smaller) is a finished window: nothing to wait.
    const other = version("old-other", "fixed-window", 5, DAY);
    await redis.set(other.key, `${Math.floor(t / WEEK)}:5`);
    expect(await other.at(t)).toMatchObject({ allowed: true, remaining: 4 });
    // And one from a 1-day rule read by a 7-day rule (the 341-year index): bounded.
    const longer = version("old-longer", "fixed-window", 5, WEEK);
    await redis.set(longer.key, `${Math.floor(t / DAY)}:5`);
    expect((await longer.at(t)).reset).toBeLessThanOrEqual(T0 + WEEK);
    const counterLonger = version("old-counter-longer", "sliding-counter", 5, WEEK);
    await redis.set(counterLonger.key, `${Math.floor(t / DAY)}:5:0`);
    await counterLonger.at(t);
    // The token bucket's old value is a time: the bucket is full again a day from now.
    const bucket = version("old-bucket", "token-bucket", 5, DAY);
    await redis.set(bucket.key, `${t + DAY}:0:5`);
    expect(await bucket.at(t)).toMatchObject({ allowed: false, retryAfterMs: DAY / 5 });
  });
});

describe("refunds across a change", () => {
  it("fixed-window and sliding-counter: a refund gives back in its own window, never rewrites the other version's", async () => {
    for (const algorithm of ["fixed-window", "sliding-counter"] as const) {
      const [day, week, name] = rule(algorithm, [5, DAY], [10, WEEK]);
      const spec = { redisKey: day.key, algorithm, limit: 5, windowMs: DAY, cost: 5 };
      const t = T0 + HOUR;
      expect((await day.at(t, 5)).allowed).toBe(true);
      const back = await refund(store, { policies: [spec], memberId: "x", at: t, now: t + 1 });
      expect(back.units, algorithm).toEqual([5]);
      expect((await day.at(t + 2, 5)).allowed, algorithm).toBe(true);
      // The 7-day version counts the day's 5 and writes its own value; a refund of the 1-day
      // version's request then gives nothing back (best effort) and leaves that value alone.
      expect(await week.at(t + 3)).toMatchObject({ allowed: true, remaining: 4 });
      const stored = await redis.get<string>(week.key);
      const late = await refund(store, { policies: [spec], memberId: "y", at: t + 2, now: t + 4 });
      expect(late.units, algorithm).toEqual([0]);
      expect(await redis.get<string>(week.key), `${algorithm} ${name}`).toBe(stored);
    }
  });

  it("token-bucket: a refund after the window changed gives the tokens back in this rule's terms", async () => {
    const [week, day] = rule("token-bucket", [10, WEEK], [10, DAY]);
    const spec = {
      redisKey: day.key,
      algorithm: "token-bucket" as const,
      limit: 10,
      windowMs: DAY,
      cost: 5,
    };
    expect(await drain(week, T0, 10)).toBe(10);
    const back = await refund(store, { policies: [spec], memberId: "z", at: T0, now: T0 + 1 });
    expect(back.units).toEqual([5]);
    // The bucket (empty in either version's terms) now lacks 5 of the 1-day version's tokens.
    expect(await day.at(T0 + 1, 5)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await day.at(T0 + 1)).allowed).toBe(false);
  });
});

describe("the Redis clock", () => {
  it.each(ALGORITHMS)(
    "%s: two versions (1d, 7d) alternating on one key: every wait bounded",
    async (algorithm) => {
      const [day, week] = rule(algorithm, [3, DAY], [4, WEEK]);
      const results: PolicyAnswer[] = [];
      for (let i = 0; i < 12; i++) results.push(await (i % 2 === 0 ? day : week).at(undefined));
      // Both versions count the same clients: the limit is reached within the first few.
      expect(results.filter((r) => r.allowed).length).toBeLessThanOrEqual(4);
      expect(results.some((r) => !r.allowed)).toBe(true);
    },
  );
});
