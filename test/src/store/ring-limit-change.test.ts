import { describe, expect, it } from "vitest";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { STAMP_AHEAD_MAX_MS, storageKey } from "../../../src/store/keys";
import { Model } from "../../support/worker/log-model";
import { prng } from "../../support/worker/prng";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// A ring whose limit changes call by call (src/store/lua/ring-reads.lua.ts: the capacity is kept,
// a lower limit decided on the newest slots, a higher one grows it, a string far larger than
// needed shrinks): every answer against the exact log at that call's limit, and the key's size.
// Costs in Redis time are the benchmark's (bench/measure/limit-change.mjs); the commands a call
// runs, test/src/store/lua/ring-commands.node.test.ts.
const redis = testRedis();
const prefix = scopedPrefix("ring-limit");
const store = testStore(30_000);
const T = 1_700_000_000_000;

describe("a limit that alternates call by call (a function limit, two versions of a rule)", () => {
  const strlen = async (key: string) => Number(await redis.strlen(key));
  const ask = (key: string, limit: number, now: number, cost = 1, window = 1_000) =>
    evaluatePolicy(store, {
      redisKey: key,
      algorithm: "sliding-log",
      limit,
      windowMs: window,
      cost,
      memberId: `alt-${limit}-${now}-${cost}`,
      now,
    });

  // Every answer equal to the exact log's at the call's own limit, the limit changing every call:
  // a large ring (read by range) beside a limit one below it and one far below it (read whole,
  // its ring far larger), and a small one.
  for (const [high, low, window] of [
    [2_000, 1_999, 2_000],
    [2_000, 10, 2_000],
    [300, 7, 500],
  ] as const) {
    it(`${high} ↔ ${low}: every answer is the exact log's at that call's limit`, async () => {
      const random = prng(high + low);
      const key = storageKey(prefix, `alt-${high}-${low}`, "client");
      const model = new Model();
      let now = T + 50_000_000;
      // Full to the higher limit first, in a burst.
      for (let i = 0; i < 4; i++) {
        const got = await ask(key, high, now, high / 4, window);
        expect(got.allowed).toBe(true);
        model.admissions.push({ id: `f${i}`, at: now, cost: high / 4, epoch: 0 });
      }
      for (let step = 0; step < 400; step++) {
        const jump = random();
        now +=
          jump < 0.5 ? 0 : jump < 0.9 ? Math.floor(random() * 20) : Math.floor(random() * window);
        const limit = step % 2 ? low : high;
        const cost = random() < 0.7 ? 1 : 1 + Math.floor(random() * Math.min(limit, 30));
        const want = model.decide(now, limit, window, cost);
        const got = await ask(key, limit, now, cost, window);
        expect(
          {
            allowed: got.allowed,
            remaining: got.remaining,
            reset: got.reset,
            retryAfterMs: got.retryAfterMs,
          },
          `step ${step}: limit ${limit} cost ${cost} at +${now - T}`,
        ).toEqual(want);
        if (got.allowed) model.admissions.push({ id: `s${step}`, at: now, cost, epoch: 0 });
      }
      // Its string never passed the larger ring's size.
      expect(await strlen(key)).toBeLessThanOrEqual(47 + 4 * (high + 1));
    });
  }

  it("lowered: none admitted while the window holds the new limit or more; raised: at once up to it", async () => {
    const key = storageKey(prefix, "alt-bounds", "client");
    // 2 000 admissions at T, limit 2 000.
    expect((await ask(key, 2_000, T, 2_000, 10_000)).allowed).toBe(true);
    // Lowered to 1 999, then to 10: the window holds 2 000, every call denied, with remaining 0.
    for (let i = 1; i <= 20; i++) {
      const limit = i % 2 ? 1_999 : 10;
      expect(await ask(key, limit, T + i, 1, 10_000), `call ${i}`).toMatchObject({
        allowed: false,
        remaining: 0,
        reset: T + 10_000,
      });
    }
    // Raised back: still full at 2 000; raised past it, the difference at once, and no more.
    expect((await ask(key, 2_000, T + 30, 1, 10_000)).allowed).toBe(false);
    expect(await ask(key, 2_500, T + 31, 500, 10_000)).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect((await ask(key, 2_500, T + 32, 1, 10_000)).allowed).toBe(false);
    // Lowered again: all 2 500 inside the window, none admitted at 2 499 or 2 000.
    expect((await ask(key, 2_499, T + 33, 1, 10_000)).allowed).toBe(false);
    expect((await ask(key, 2_000, T + 34, 1, 10_000)).allowed).toBe(false);
    // The 2 000 of T leave at T + 10 000: under 2 000 exactly 1 500 fit then (500 still inside).
    expect(await ask(key, 2_000, T + 10_000, 1_500, 10_000)).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect((await ask(key, 2_000, T + 10_001, 1, 10_000)).allowed).toBe(false);
    // And at 10, nothing: 2 000 inside.
    expect((await ask(key, 10, T + 10_002, 1, 10_000)).allowed).toBe(false);
  });

  it("memory stays bounded: alternations keep the ring's size, a limit kept low shrinks it", async () => {
    const key = storageKey(prefix, "alt-memory", "client");
    const full = 47 + 4 * (4_000 + 1);
    expect((await ask(key, 4_000, T, 4_000, 1_000)).allowed).toBe(true);
    expect(await strlen(key)).toBe(full);
    // Alternating 4 000 ↔ 3 999 ↔ 10 while full, then while it drains: never larger.
    let now = T;
    for (let i = 0; i < 60; i++) {
      now += i < 30 ? 1 : 40;
      await ask(key, [4_000, 3_999, 10][i % 3] ?? 10, now, 1, 1_000);
      expect(await strlen(key), `call ${i}`).toBeLessThanOrEqual(full);
    }
    // Then only the low limit, for more than a window (the lease margin, 10 s, included): the
    // ring's string holds at most twice what that limit keeps, plus 34 slots.
    now += 1_000 + STAMP_AHEAD_MAX_MS;
    for (let i = 0; i < 5; i++) {
      now += 100;
      await ask(key, 10, now, 1, 1_000);
    }
    expect(await strlen(key)).toBeLessThanOrEqual(47 + 4 * (2 * 10 + 34));
    // And raised again: admitted at once, and at most the full ring of that limit.
    now += 1;
    expect(await ask(key, 4_000, now, 3_000, 1_000)).toMatchObject({
      allowed: true,
      remaining: 1_000 - 5,
    });
    expect(await strlen(key)).toBeLessThanOrEqual(full);
  });

  it("out of order (a lease's stamps ahead among the older slots): a lower limit still counts them", async () => {
    const key = storageKey(prefix, "alt-lease", "client");
    const window = 60_000;
    // 3 units stamped 5 s ahead, then 7 ordinary ones: the ring's oldest slots hold the newest
    // times. Under limit 4 the decision's slots are the 4 newest (T + 4 … T + 7).
    const lease = await evaluate(store, {
      policies: [{ redisKey: key, algorithm: "sliding-log", limit: 10, windowMs: window, cost: 3 }],
      memberId: "lease",
      now: T,
      stampOffsetMs: 5_000,
    });
    expect(lease.allowed).toBe(true);
    for (let i = 1; i <= 7; i++) expect((await ask(key, 10, T + i, 1, window)).allowed).toBe(true);
    // Those 7 have left (T + 60 008), just now: the lease's 3 are inside until T + 65 000. The
    // exact log at 4 would take 1; the ring reads back over the slots that left the window only
    // just, finds the lease's, and denies: stricter, never past the limit, as the ring at its
    // own limit is with such times (at 10 its oldest slots, the lease's, are inside too).
    expect((await ask(key, 4, T + 60_008, 1, window)).allowed).toBe(false);
    expect((await ask(key, 10, T + 60_009, 1, window)).allowed).toBe(false);
    // Once the lease's units leave, the lower limit has its whole room at once.
    expect(await ask(key, 4, T + 65_000 + 7 + window, 4, window)).toMatchObject({
      allowed: true,
      remaining: 0,
    });
  });

  it("a burst that left the window only just is read once under a lower limit, then dropped", async () => {
    const key = storageKey(prefix, "alt-burst", "client");
    const window = 1_000;
    // 2 000 units in one ms, then, just after they leave the window, 300 at limit 500: its slots
    // are free, and the older ones (the burst, within STAMP_AHEAD_MAX of the window's start) are
    // read back once, found outside, and dropped: the ring is shrunk to 500 (too many live to be
    // written compact), so no later call reads them again.
    expect((await ask(key, 2_000, T, 2_000, window)).allowed).toBe(true);
    expect(await ask(key, 500, T + window, 300, window)).toMatchObject({
      allowed: true,
      remaining: 200,
      reset: T + 2 * window,
    });
    expect(await strlen(key)).toBeLessThanOrEqual(47 + 4 * 501);
    expect((await ask(key, 500, T + window + 1, 201, window)).allowed).toBe(false);
    // The higher limit again: its whole room less the 300, at once.
    expect(await ask(key, 2_000, T + window + 2, 1_700, window)).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    expect((await ask(key, 2_000, T + window + 3, 1, window)).allowed).toBe(false);
    expect((await ask(key, 500, T + window + 4, 1, window)).allowed).toBe(false);
  });
});
