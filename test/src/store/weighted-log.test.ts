// The weighted log (sliding-log-weighted) and its settle, on the real store through the bridge,
// on the caller's clock (a fake one: every time below is chosen, none waited for).
import { describe, expect, it } from "vitest";
import { MAX_WEIGHTED_ENTRIES } from "../../../src/store/caps";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { refund } from "../../../src/store/refund";
import type { StorePolicy } from "../../../src/store/script-inputs";
import { settle } from "../../../src/store/settle";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";
import { logEntries, logHeader } from "../../support/worker/weighted-layout";

const T = 1_700_000_000_000;
const redis = testRedis();
const prefix = scopedPrefix("wlog");
const store = testStore(10_000);

/** The sum and count a weighted log's header holds. */
async function sumOf(key: string): Promise<{ sum: number; n: number }> {
  const { sum, n } = await logHeader(redis, key);
  return { sum, n };
}

/** Settle on the weighted logs (their settle reads no clock and no `at`). */
const settleIn = (policies: readonly StorePolicy[], memberId: string, units: readonly number[]) =>
  settle(store, { policies, memberId, units, at: T });

const spec = (name: string, limit: number, cost: number, windowMs = 1_000): StorePolicy => ({
  redisKey: storageKey(prefix, name, "client", "sliding-log-weighted"),
  algorithm: "sliding-log-weighted",
  limit,
  windowMs,
  cost,
});

describe("the weighted log", () => {
  it("weighs each admission by its cost; a denial says when enough units leave", async () => {
    const policy = spec("weigh", 1_000_000_000_000, 400_000_000_000);
    const at = (memberId: string, now: number, cost = policy.cost) =>
      evaluatePolicy(store, { ...policy, cost, memberId, now });
    expect(await at("a", T)).toMatchObject({ allowed: true, remaining: 600_000_000_000 });
    expect(await at("b", T + 100)).toMatchObject({ allowed: true, remaining: 200_000_000_000 });
    // 300e9 more needs a's 400e9 gone (at T + 1000); b's would not be enough alone.
    expect(await at("c", T + 200, 300_000_000_000)).toMatchObject({
      allowed: false,
      remaining: 200_000_000_000,
      reset: T + 1_000,
      retryAfterMs: 800,
    });
    // The denial wrote nothing; at T + 1000 a has left the window.
    expect(await at("d", T + 1_000, 600_000_000_000)).toMatchObject({
      allowed: true,
      remaining: 0,
    });
    // One entry per admission in the window, whatever its units: the header counts 2.
    expect(await sumOf(policy.redisKey)).toMatchObject({ n: 2 });
  });

  it("settle charges the difference, even past the limit, or gives it back, once", async () => {
    const policy = spec("settle", 100, 10);
    for (const [memberId, now] of [
      ["m1", T],
      ["m2", T + 10],
    ] as const) {
      expect((await evaluatePolicy(store, { ...policy, memberId, now })).allowed).toBe(true);
    }
    // m1 used 95: 85 more is charged although only 80 were left.
    expect(await settleIn([policy], "m1", [95])).toEqual({
      status: "settled",
      charged: [85],
    });
    expect(await settleIn([policy], "m1", [0])).toEqual({
      status: "already-settled",
      charged: [0],
    });
    expect(
      await evaluatePolicy(store, { ...policy, cost: 1, memberId: "x", now: T + 20 }),
    ).toMatchObject({ allowed: false, remaining: 0, reset: T + 1_000 });
    // m2 used 3: 7 back, and with m1's 95 there are 2 left.
    expect(await settleIn([policy], "m2", [3])).toEqual({
      status: "settled",
      charged: [-7],
    });
    expect(
      await evaluatePolicy(store, { ...policy, cost: 2, memberId: "m3", now: T + 30 }),
    ).toMatchObject({ allowed: true, remaining: 0 });
    // Never admitted, or refunded: nothing to settle, nothing written.
    expect(await settleIn([policy], "nobody", [5])).toEqual({
      status: "unknown",
      charged: [0],
    });
    expect(
      await refund(store, { policies: [policy], memberId: "m3", at: T + 30, now: T + 30 }),
    ).toEqual({
      refunded: true,
      units: [2],
    });
    expect(await settleIn([policy], "m3", [5])).toMatchObject({ status: "unknown" });
    // m1 leaves at T + 1000 with its 95 units: 95 + 2 (m3 refunded) free again.
    expect(
      await evaluatePolicy(store, { ...policy, cost: 97, memberId: "m4", now: T + 1_000 }),
    ).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("settles every usage log of the request, all or nothing", async () => {
    const minute = spec("both-m", 100, 10, 60_000);
    const day = spec("both-d", 1_000, 10, 86_400_000);
    const both = [minute, day];
    const decided = await evaluatePolicy(store, { ...minute, memberId: "r1", now: T });
    expect(decided.allowed).toBe(true);
    expect((await evaluatePolicy(store, { ...day, memberId: "r1", now: T })).allowed).toBe(true);
    expect(await settleIn(both, "r1", [40, 40])).toEqual({
      status: "settled",
      charged: [30, 30],
    });
    expect(await settleIn(both, "r1", [40, 40])).toMatchObject({ status: "already-settled" });
    expect(
      await evaluatePolicy(store, { ...day, cost: 960, memberId: "r2", now: T + 1 }),
    ).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("settles nothing of an entry that left the window, though its bytes are still there", async () => {
    // An entry that left was taken off the sum with its units then: settling it afterwards
    // would move the sum by units no entry in the window holds. Until 4 kB have left, its bytes
    // (state r) stay where the admission put them: a settle that writes at the entry's place
    // without knowing where the live entries start would charge it.
    const policy = spec("left", 100, 60);
    expect((await evaluatePolicy(store, { ...policy, memberId: "l1", now: T })).allowed).toBe(true);
    expect(
      await evaluatePolicy(store, { ...policy, cost: 10, memberId: "l2", now: T + 1_000 }),
    ).toMatchObject({ allowed: true, remaining: 90 });
    const before = await logEntries(redis, policy.redisKey);
    expect(before).toMatch(/^l1,\d{13},0000000000060,r;/);
    const header = await logHeader(redis, policy.redisKey);
    expect(await settleIn([policy], "l1", [0])).toEqual({ status: "unknown", charged: [0] });
    expect(await settleIn([policy], "l1", [100])).toEqual({ status: "unknown", charged: [0] });
    expect(await logEntries(redis, policy.redisKey)).toBe(before);
    expect(await logHeader(redis, policy.redisKey)).toEqual(header);
    // The sum is l2's 10 alone: 90 fit, one more does not.
    expect(
      await evaluatePolicy(store, { ...policy, cost: 90, memberId: "l3", now: T + 1_001 }),
    ).toMatchObject({ allowed: true, remaining: 0 });
    expect(
      await evaluatePolicy(store, { ...policy, cost: 1, memberId: "l4", now: T + 1_002 }),
    ).toMatchObject({ allowed: false });
  });
});

describe("the weighted log's bound on admissions", () => {
  it("holds at most MAX_WEIGHTED_ENTRIES admissions in its window, whatever units are left", async () => {
    const policy = spec("entries", 1_000_000_000_000, 1, 60_000);
    // A full log as admissions would leave it: one a ms from T, 1 unit each, in the v1 layout
    // (text trailer) a log written before the header holds: read, then written whole as v2.
    const pad = (x: number, width: number) => String(x).padStart(width, "0");
    const entries = Array.from({ length: MAX_WEIGHTED_ENTRIES }, (_, i) => {
      return `e${i},${pad(T + i, 13)},${pad(1, 13)},r;`;
    });
    const body = entries.join("");
    const trailer = `|W${pad(MAX_WEIGHTED_ENTRIES, 16)}${pad(MAX_WEIGHTED_ENTRIES, 6)}${pad(0, 9)}${pad(T + 120_000, 15)}${pad(body.length, 10)}`;
    await redis.set(policy.redisKey, `${body}${trailer}`, { px: 60_000 });
    const now = T + MAX_WEIGHTED_ENTRIES;
    // Denied until the oldest leaves (at T + window), though units are left.
    expect(await evaluatePolicy(store, { ...policy, memberId: "x", now })).toMatchObject({
      allowed: false,
      remaining: 1_000_000_000_000 - MAX_WEIGHTED_ENTRIES,
      reset: T + 60_000,
    });
    const later = await evaluatePolicy(store, { ...policy, memberId: "y", now: T + 60_000 });
    expect(later.allowed).toBe(true);
    expect(await settleIn([policy], "y", [7])).toMatchObject({ charged: [6] });
    // The first admission left; y's entry came, with its settled 7 units.
    expect(await sumOf(policy.redisKey)).toEqual({
      sum: MAX_WEIGHTED_ENTRIES - 1 + 7,
      n: MAX_WEIGHTED_ENTRIES,
    });
  });
});

describe("a weighted log longer than one read", () => {
  it("walks, trims, compacts and settles past the first and last 8 kB exactly", async () => {
    const policy = spec("long", 1_000, 1, 60_000);
    const pad = (x: number, width: number) => String(x).padStart(width, "0");
    // 1 000 entries of 1 unit (~47 kB): one a ms from T, in the v1 layout (read as it is, and
    // written whole as v2 by its first admission).
    const body = Array.from(
      { length: 1_000 },
      (_, i) => `m${pad(i, 4)},${pad(T + i, 13)},${pad(1, 13)},r;`,
    ).join("");
    const trailer = `|W${pad(1_000, 16)}${pad(1_000, 6)}${pad(0, 9)}${pad(T + 120_000, 15)}${pad(body.length, 10)}`;
    await redis.set(policy.redisKey, `${body}${trailer}`, { px: 60_000 });
    // 500 units more need the oldest 500 gone: the wait walks ~24 kB of entries.
    expect(
      await evaluatePolicy(store, { ...policy, cost: 500, memberId: "w", now: T + 2_000 }),
    ).toMatchObject({ allowed: false, remaining: 0, reset: T + 499 + 60_000 });
    // An old entry (far before the last 8 kB) settles: 1 → 4.
    expect(await settleIn([policy], "m0007", [4])).toEqual({
      status: "settled",
      charged: [3],
    });
    // At T + 60 300 the oldest 301 have left (~14 kB: compacted), with m0007's 4 units.
    const later = await evaluatePolicy(store, {
      ...policy,
      cost: 300,
      memberId: "c",
      now: T + 60_300,
    });
    expect(later).toMatchObject({ allowed: true, remaining: 1 });
    expect(await sumOf(policy.redisKey)).toEqual({
      sum: 999,
      n: 700,
    });
    // The newest settle and an older one after compaction: each once.
    expect(await settleIn([policy], "c", [1])).toMatchObject({ charged: [-299] });
    expect(await settleIn([policy], "m0500", [0])).toMatchObject({ charged: [-1] });
    expect(await settleIn([policy], "m0500", [0])).toMatchObject({
      status: "already-settled",
    });
    expect(await settleIn([policy], "m0007", [9])).toMatchObject({
      status: "unknown",
    });
    expect(
      // 699 − m0301's 1 (left) + 302 = the limit.
      await evaluatePolicy(store, { ...policy, cost: 302, memberId: "d", now: T + 60_301 }),
    ).toMatchObject({ allowed: true, remaining: 0 });
  });

  it("settles each log with its own units (rules that read their usage differently)", async () => {
    const minute = spec("each-m", 100, 10, 60_000);
    const day = spec("each-d", 1_000, 10, 86_400_000);
    const both = [minute, day];
    for (const policy of [minute, day]) {
      expect((await evaluatePolicy(store, { ...policy, memberId: "e1", now: T })).allowed).toBe(
        true,
      );
    }
    expect(await settleIn(both, "e1", [4, 250])).toEqual({
      status: "settled",
      charged: [-6, 240],
    });
    // What each log holds now: 4 of 100, and 250 of 1 000.
    expect(
      await evaluatePolicy(store, { ...minute, cost: 96, memberId: "e2", now: T + 1 }),
    ).toMatchObject({ allowed: true, remaining: 0 });
    expect(
      await evaluatePolicy(store, { ...day, cost: 751, memberId: "e2", now: T + 1 }),
    ).toMatchObject({ allowed: false });
  });
});
