// The weighted log's sum at the bounds usage settles can reach, on the real store through
// the bridge, on the caller's clock (a fake one: every time below is chosen, none waited for).
import { describe, expect, it } from "vitest";
import { MAX_USAGE_LIMIT, MAX_WEIGHTED_ENTRIES } from "../../../src/store/caps";
import { evaluate, evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { settle } from "../../../src/store/settle";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { logHeader } from "../../support/worker/weighted-layout";

const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("wlog-bounds");
const store = testStore(10_000);
const pad = (x: number, width: number) => String(x).padStart(width, "0");

describe("the weighted log's sum", () => {
  // Settles charge past the limit (as they must), up to 10¹² each: MAX_WEIGHTED_ENTRIES
  // admissions settled at 10¹² would make the sum 10¹⁶, past the trailer's 16 digits (the next
  // admission would read the log as empty, as a reset) and past 2^53. A settle's charge is cut
  // to what the sum holds (9·10¹⁵): the log still denies, and its sum stays what it holds.
  it("still denies once settles would charge 10¹⁶ units into one window", async () => {
    const policy: StorePolicy = {
      redisKey: storageKey(prefix, "sum", "client", "sliding-log-weighted"),
      algorithm: "sliding-log-weighted",
      limit: MAX_USAGE_LIMIT,
      windowMs: 60_000,
      cost: 1,
    };
    // What MAX_WEIGHTED_ENTRIES − 1 admissions settled at 10¹² leave, and one more in flight,
    // in the v1 layout (its 16-digit sum: the bound was set for it); the settle searches it.
    const settled = Array.from(
      { length: MAX_WEIGHTED_ENTRIES - 1 },
      (_, i) => `e${i},${pad(T + i, 13)},${pad(MAX_USAGE_LIMIT, 13)},s;`,
    );
    const last = `last,${pad(T + MAX_WEIGHTED_ENTRIES, 13)},${pad(1, 13)},r;`;
    const body = `${settled.join("")}${last}`;
    const sum = (MAX_WEIGHTED_ENTRIES - 1) * MAX_USAGE_LIMIT + 1;
    const trailer = `|W${pad(sum, 16)}${pad(MAX_WEIGHTED_ENTRIES, 6)}${pad(0, 9)}${pad(T + 120_000, 15)}${pad(body.length, 10)}`;
    await redis.set(policy.redisKey, `${body}${trailer}`, { px: 60_000 });
    try {
      // The window is far over its limit: denied.
      const before = await evaluatePolicy(store, {
        ...policy,
        memberId: "probe1",
        now: T + 20_000,
      });
      expect(before.allowed).toBe(false);
      // The last request settles at the most a response may report.
      expect(
        await settle(store, {
          policies: [policy],
          memberId: "last",
          units: [MAX_USAGE_LIMIT],
          at: T + MAX_WEIGHTED_ENTRIES,
        }),
      ).toEqual({ status: "settled", charged: [0] });
      const after = await evaluatePolicy(store, { ...policy, memberId: "probe2", now: T + 20_001 });
      expect(after.allowed).toBe(false);
    } finally {
      await redis.del(policy.redisKey);
    }
  });

  it("cuts a settle at its offset (one BITFIELD) to what the sum holds, too", async () => {
    const policy: StorePolicy = {
      redisKey: storageKey(prefix, "fast-sum", "client", "sliding-log-weighted"),
      algorithm: "sliding-log-weighted",
      limit: MAX_USAGE_LIMIT,
      windowMs: 60_000,
      cost: 1,
    };
    try {
      const admitted = await evaluate(store, { policies: [policy], memberId: "fast", now: T });
      expect(admitted.allowed).toBe(true);
      const offsets = admitted.offsets ?? [];
      expect(offsets).toEqual([0]);
      // The sum 100 units short of what it holds (9·10¹⁵), as settled entries would leave it.
      const full = 9_000_000_000_000_000;
      await redis.eval(
        "return redis.call('BITFIELD', KEYS[1], 'SET', 'i64', 112, ARGV[1])",
        [policy.redisKey],
        [String(full - 100)],
      );
      const answer = await settle(store, {
        policies: [policy],
        memberId: "fast",
        units: [MAX_USAGE_LIMIT],
        offsets,
        at: T,
      });
      expect(answer).toEqual({ status: "settled", charged: [100] });
      expect((await logHeader(redis, policy.redisKey)).sum).toBe(full);
      expect(await redis.getrange(policy.redisKey, 30, -1)).toMatch(
        /^fast,\d{13},0000000000101,s;$/,
      );
    } finally {
      await redis.del(policy.redisKey);
    }
  });
});
