import { describe, expect, inject, it } from "vitest";
import type { Algorithm } from "../../../src/store/algorithm";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { STAMP_AHEAD_MAX_MS, storageKey } from "../../../src/store/keys";
import { peekQuota } from "../../../src/store/peek-reset";
import { refund } from "../../../src/store/refund";
import { Model } from "../../support/worker/log-model";
import { LOG_LAYOUTS, readLog } from "../../support/worker/log-state";
import { prng } from "../../support/worker/prng";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// The ring layout of the exact log (src/store/lua/sliding-log-ring.lua.ts) against a reference
// model kept in the test: every admission's time, counted the way the contract says (a unit admitted
// at s is inside the window while now < s + window).
const redis = testRedis();
const prefix = scopedPrefix("ring");
const store = testStore(30_000);
const T = 1_700_000_000_000;

describe("the ring against a reference model (random costs, clocks, refunds, limit changes)", () => {
  // Small rings (read whole), and large ones past RING_WHOLE_MAX (1 028 slots): the first read,
  // the GETRANGE/SETRANGE path, wrapping, compaction. The 250-slot shape runs the gap round a large ring twice: the header rewritten as the gap drifts,
  // reads and writes that wrap past the string's end.
  const SHAPES = [
    { limit: 7, window: 1_000, steps: 160 },
    { limit: 60, window: 5_000, steps: 160 },
    { limit: 300, window: 2_000, steps: 160 },
    { limit: 250, window: 400, steps: 900 },
    // Past the whole-read size (limit 1 028): a ring far under its limit kept compact, and one
    // at its limit read by range, its gap going round.
    { limit: 1_200, window: 3_000, steps: 700 },
    { limit: 1_100, window: 60_000, steps: 700 },
  ];
  for (const [s, shape] of SHAPES.entries()) {
    for (const seed of [11, 12, 13]) {
      it(`limit ${shape.limit}, window ${shape.window} ms, seed ${seed}: every answer equals the model's`, async () => {
        const random = prng(seed * 1_000 + s);
        const key = storageKey(prefix, `model-${s}-${seed}`, "client");
        const model = new Model();
        let now = T + seed * 10_000_000;
        let { limit } = shape;
        const { window } = shape;
        const layout: Algorithm = "sliding-log";
        let epoch = 0;
        let n = 0;
        for (let step = 0; step < shape.steps; step++) {
          const r = random();
          // Time moves forward as the Redis clock does: often not at all, sometimes far.
          const jump = random();
          now +=
            jump < 0.4 ? 0 : jump < 0.8 ? Math.floor(random() * 40) : Math.floor(random() * window);
          if (r < 0.03) {
            // The rule's limit changes (a deploy): the ring is rebuilt at the new size.
            limit = Math.max(1, Math.round(limit * (0.5 + random())));
            // A lowered limit keeps only the newest admissions: older ones are not refundable.
            epoch++;
            continue;
          }
          const refundable = model.admissions.filter((a) => a.epoch === epoch);
          if (r < 0.18 && refundable.length > 0) {
            const victim = refundable[Math.floor(random() * refundable.length)];
            if (!victim) continue;
            const back = await refund(store, {
              policies: [
                { redisKey: key, algorithm: layout, limit, windowMs: window, cost: victim.cost },
              ],
              memberId: victim.id,
              at: victim.at,
              now: victim.at,
            });
            // Exact: all its units, while it is still inside the window (a unit that left it is
            // gone from the log's count either way).
            if (victim.at > now - window) expect(back.units, `step ${step}`).toEqual([victim.cost]);
            model.admissions = model.admissions.filter((a) => a !== victim);
            continue;
          }
          const cost = random() < 0.7 ? 1 : 1 + Math.floor(random() * Math.min(limit, 40));
          const id = `m${n++}`;
          const want = model.decide(now, limit, window, cost);
          const got = await evaluatePolicy(store, {
            redisKey: key,
            algorithm: layout,
            limit,
            windowMs: window,
            cost,
            memberId: id,
            now,
          });
          expect(
            {
              allowed: got.allowed,
              remaining: got.remaining,
              reset: got.reset,
              retryAfterMs: got.retryAfterMs,
            },
            `step ${step}: ${layout} limit ${limit} cost ${cost} at +${now - T}`,
          ).toEqual(want);
          if (got.allowed) model.admissions.push({ id, at: now, cost, epoch });
        }
      });
    }
  }
});

describe("out-of-order times (the caller's clock across isolates, lease stamps)", () => {
  it("never admits past the limit in any window, whatever order the times arrive in", async () => {
    for (const seed of [21, 22, 23]) {
      const random = prng(seed);
      const limit = 20;
      const window = 1_000;
      const key = storageKey(prefix, `skew-${seed}`, "client");
      const admitted: number[] = [];
      let clock = T;
      for (let step = 0; step < 400; step++) {
        clock += Math.floor(random() * 15);
        // Four isolates whose clocks are up to 80 ms apart.
        const now = clock + Math.floor(random() * 4) * 20;
        const cost = random() < 0.8 ? 1 : 3;
        const got = await evaluatePolicy(store, {
          redisKey: key,
          algorithm: "sliding-log",
          limit,
          windowMs: window,
          cost,
          memberId: `k${step}`,
          now,
        });
        if (got.allowed) for (let i = 0; i < cost; i++) admitted.push(now);
        // The units the log holds inside the window of this call's clock never pass the limit.
        const inside = admitted.filter((t) => t > now - window && t <= now).length;
        expect(inside, `seed ${seed} step ${step}`).toBeLessThanOrEqual(limit);
      }
      // And it is not a lockout: most of the offered capacity was used.
      expect(admitted.length).toBeGreaterThan(((clock - T) / window) * limit * 0.8);
    }
  });

  it("a unit stamped in the future (a lease) counts until its stamp leaves the window", async () => {
    const key = storageKey(prefix, "ahead", "client");
    const policy = {
      redisKey: key,
      algorithm: "sliding-log" as const,
      limit: 5,
      windowMs: 1_000,
      cost: 5,
    };
    const lease = await evaluate(store, {
      policies: [policy],
      memberId: "lease",
      now: T,
      stampOffsetMs: 500,
    });
    expect(lease).toMatchObject({ allowed: true, now: T, stamp: T + 500 });
    expect((await readLog(redis, key)).times).toEqual(Array(5).fill(T + 500));
    const one = { ...policy, cost: 1 };
    // Stamped T + 500: counted until T + 1500, not T + 1000.
    expect(await evaluatePolicy(store, { ...one, memberId: "a", now: T + 1_499 })).toMatchObject({
      allowed: false,
      retryAfterMs: 1,
    });
    expect(
      await evaluatePolicy(store, { ...one, cost: 5, memberId: "b", now: T + 1_500 }),
    ).toMatchObject({
      allowed: true,
      remaining: 0,
    });
  });

  it("returns a lease's unspent units exactly while they still count", async () => {
    for (const layout of LOG_LAYOUTS) {
      const key = storageKey(prefix, `lease-back-${layout}`, "client");
      const policy = { redisKey: key, algorithm: layout, limit: 10, windowMs: 10_000, cost: 8 };
      const lease = await evaluate(store, {
        policies: [policy],
        memberId: `lease-${layout}`,
        now: T,
        stampOffsetMs: 1_000,
      });
      expect(lease.allowed).toBe(true);
      const back = await refund(store, {
        policies: [{ ...policy, cost: 5 }],
        memberId: `lease-${layout}`,
        at: lease.stamp,
        now: lease.stamp,
      });
      expect(back.units, layout).toEqual([5]);
      const after = await evaluatePolicy(store, {
        ...policy,
        cost: 7,
        memberId: `after-${layout}`,
        now: T + 10,
      });
      expect(after, layout).toMatchObject({ allowed: true, remaining: 0 });
    }
  });

  it("refuses a stamp offset past STAMP_AHEAD_MAX_MS or on an O(1) algorithm, before the store", async () => {
    const policy = {
      redisKey: storageKey(prefix, "bad-ahead", "client"),
      algorithm: "sliding-log" as const,
      limit: 5,
      windowMs: 1_000,
      cost: 1,
    };
    await expect(
      evaluate(store, {
        policies: [policy],
        memberId: "x",
        stampOffsetMs: STAMP_AHEAD_MAX_MS + 1,
      }),
    ).rejects.toThrow(RangeError);
    await expect(
      evaluate(store, {
        policies: [{ ...policy, algorithm: "token-bucket" }],
        memberId: "x",
        stampOffsetMs: 10,
      }),
    ).rejects.toThrow(TypeError);
    expect(await redis.exists(policy.redisKey)).toBe(0);
  });
});

describe("changing a rule's limit", () => {
  it("a lower limit keeps the newest admissions; a higher one frees exactly the difference", async () => {
    const key = storageKey(prefix, "resize", "client");
    const ask = (limit: number, now: number, cost = 1) =>
      evaluatePolicy(store, {
        redisKey: key,
        algorithm: "sliding-log",
        limit,
        windowMs: 1_000,
        cost,
        memberId: `r-${limit}-${now}`,
        now,
      });
    for (let i = 0; i < 10; i++) expect((await ask(10, T + i * 10)).allowed).toBe(true);
    // Limit 10 → 4: full; the 7th oldest (T + 60) must leave before one more fits.
    expect(await ask(4, T + 200)).toMatchObject({ allowed: false, retryAfterMs: 860 });
    expect((await ask(4, T + 1_059)).allowed).toBe(false);
    expect((await ask(4, T + 1_060)).allowed).toBe(true);
    // Limit 4 → 400 (past the whole-string size: GETRANGE from now on): 400 - 4 more fit.
    expect(await ask(400, T + 1_061, 396)).toMatchObject({ allowed: true, remaining: 0 });
    expect((await ask(400, T + 1_062)).allowed).toBe(false);
    expect((await readLog(redis, key)).slots).toBe(400);
  });
});

describe("peek reads the ring as its script decides", () => {
  it("answers what the next decision would, and writes nothing", async () => {
    const key = storageKey(prefix, "peek", "client");
    const base = { redisKey: key, algorithm: "sliding-log" as const, limit: 3, windowMs: 1_000 };
    await evaluatePolicy(store, { ...base, cost: 2, memberId: "p1", now: T });
    const before = await readLog(redis, key);
    const quota = { prefix, policy: "peek", key: "client", limit: 3, windowMs: 1_000 };
    expect(await peekQuota(store, { ...quota, cost: 1, now: T + 10 })).toMatchObject({
      allowed: true,
      remaining: 1,
      reset: T + 1_000,
    });
    expect(await peekQuota(store, { ...quota, cost: 2, now: T + 10 })).toMatchObject({
      allowed: false,
      retryAfterMs: 990,
    });
    expect(await readLog(redis, key)).toEqual(before);
  });
});

describe("memory follows use", () => {
  it("a client with 3 requests under a limit of 100 000 costs bytes for 3, and a full ring its exact size", async () => {
    const usage = async (key: string) => {
      // MEMORY USAGE is not in the client's API: one raw REST call to the bridge.
      const response = await fetch(inject("bridgeUrl"), {
        method: "POST",
        headers: { Authorization: `Bearer ${inject("bridgeToken")}` },
        body: JSON.stringify(["MEMORY", "USAGE", key, "SAMPLES", "0"]),
      });
      return ((await response.json()) as { result: number }).result;
    };
    const few = storageKey(prefix, "few", "client");
    for (let i = 0; i < 3; i++) {
      const got = await evaluatePolicy(store, {
        redisKey: few,
        algorithm: "sliding-log",
        limit: 100_000,
        windowMs: 3_600_000,
        cost: 1,
        memberId: `few${i}`,
        now: T + i,
      });
      expect(got).toMatchObject({ allowed: true, remaining: 100_000 - i - 1 });
    }
    // 47 bytes of header and 4 slots (3 times and the gap), plus this test's ~70-byte key name
    // and Redis's overhead: 280 measured. Preallocated, the ring would be 400 kB.
    expect(await usage(few)).toBeLessThan(300);
    expect((await readLog(redis, few)).times).toEqual([T, T + 1, T + 2]);

    // Filled to its limit in growing writes, the ring is rewritten at its exact size when the
    // writes reach its end (a string grown by SETRANGE keeps up to twice its length allocated).
    const full = storageKey(prefix, "full", "client");
    for (let i = 0; i < 10; i++) {
      const got = await evaluatePolicy(store, {
        redisKey: full,
        algorithm: "sliding-log",
        limit: 10_000,
        windowMs: 3_600_000,
        cost: 1_000,
        memberId: `full${i}`,
        now: T + i,
      });
      expect(got.allowed).toBe(true);
    }
    const bytes = await usage(full);
    expect(bytes).toBeGreaterThan(4 * 10_000);
    expect(bytes).toBeLessThan(4 * 10_000 + 2_000);
  });
});
