// A store that refuses TIME in scripts, met first by each family of script calls: the script
// runner (script-runner.ts) retries the refused call once on the caller's clock, whoever made it,
// so each family answers as on a healthy store, the store refuses once per client, and a script
// that never reads TIME is never retried. The store is the fault server's "refuse-time" front on
// the real bridge: scripts fail where they call TIME, everything else is Redis.
import { describe, expect, it, vi } from "vitest";
import { createAnalytics } from "../../../src/analytics/create-analytics";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { clockSlotOf } from "../../../src/store/clock-slots";
import { evaluate } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { PEEK_SCRIPT } from "../../../src/store/lua/peek.lua";
import {
  REGION_FORGET_SCRIPT,
  REGION_PUT_SCRIPT,
  REGION_RETURN_SCRIPT,
  REGION_SPEND_SCRIPT,
} from "../../../src/store/lua/region-lease.lua";
import { EVALUATE_SCRIPTS, REFUND_SCRIPT } from "../../../src/store/lua/scripts";
import { peekQuota, resetQuota } from "../../../src/store/peek-reset";
import { readNetworkBlocks } from "../../../src/store/plan-reads";
import { refund } from "../../../src/store/refund";
import { regionPut, regionReturn, regionSpend } from "../../../src/store/region-lease";
import { runScript } from "../../../src/store/script-runner";
import { counting, faultScenario, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { plansAdmin } from "../../support/worker/plans-admin";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("time-refusal");

/** A fresh store client on a fresh TIME-refusing front: no script has met it yet. */
async function refusingStore(autoPipeline = false) {
  const front = await faultScenario("refuse-time");
  return { front, client: storeAt(front.url, 5_000, autoPipeline) };
}

/** Console lines while `work` runs (the default report of a clock switch is one console.warn). */
async function captured<T>(work: () => Promise<T>): Promise<{ value: T; lines: string[] }> {
  const lines: string[] = [];
  const spies = (["log", "warn", "error"] as const).map((level) =>
    vi.spyOn(console, level).mockImplementation((...args) => {
      lines.push(args.map(String).join(" "));
    }),
  );
  try {
    return { value: await work(), lines };
  } finally {
    for (const spy of spies) spy.mockRestore();
  }
}

describe("each script family, first on a store that refuses TIME", () => {
  it.each([false, true])(
    "peek (auto-pipeline %s): answers from the log, on the caller's clock; refused once, said once",
    async (autoPipeline) => {
      const { front, client } = await refusingStore(autoPipeline);
      const quota = { prefix, policy: "rt-peek", key: "k", limit: 3, windowMs: 60_000 };
      const { value, lines } = await captured(() => peekQuota(client, quota));
      expect(value).toMatchObject({ allowed: true, remaining: 3 });
      expect(Math.abs(value.now - Date.now())).toBeLessThan(60_000);
      expect((await front.stats()).refusedTime).toBe(1);
      expect(lines.filter((line) => line.includes('"store-clock"'))).toHaveLength(1);
      // The next one passes the caller's clock from the start.
      expect(await peekQuota(client, quota)).toMatchObject({ remaining: 3 });
      expect((await front.stats()).refusedTime).toBe(1);
    },
  );

  it("reset: reads no clock, so it is sent once and never refused", async () => {
    const { front, client } = await refusingStore();
    const key = { prefix, policy: "rt-reset", key: "k" };
    await evaluate(testStore(), {
      policies: [
        {
          redisKey: storageKey(prefix, "rt-reset", "k"),
          algorithm: "sliding-log",
          limit: 5,
          windowMs: 60_000,
          cost: 2,
        },
      ],
      memberId: "rt-reset-1",
    });
    const counted = counting(client);
    expect(await resetQuota(counted.store as typeof client, key)).toBe(true);
    expect(await logCount(redis, storageKey(prefix, "rt-reset", "k"))).toBe(0);
    expect((await front.stats()).refusedTime ?? 0).toBe(0);
    // EVALSHA (NOSCRIPT on this front) then EVAL: no third call, no clock retry.
    expect(counted.calls()).toBe(2);
  });

  it("plans: a key block with an end, then overrides set, read and listed", async () => {
    const { front, client } = await refusingStore();
    const own = `${prefix}-plans`;
    // The block's end is the store's now + 60 s: the first script here that reads the clock.
    expect(
      await plansAdmin(client, own).blocks.add({ policy: "rt", key: "k" }, { seconds: 60 }),
    ).toEqual({
      ok: true,
      existed: false,
    });
    expect((await front.stats()).refusedTime).toBe(1);
    await plansAdmin(client, own).overrides.set("rt", "other", { limit: 7 });
    const other = { policy: "rt", key: "other", limit: 5, windowMs: 60_000, overrides: true };
    expect(await plansAdmin(client, own).peek(other)).toMatchObject({
      peeked: true,
      limit: 7,
      remaining: 7,
      source: "redis",
    });
    const overrides = await plansAdmin(client, own).plans.list({
      what: "overrides",
      cursor: "0",
      count: 100,
    });
    expect(overrides.entries).toEqual([
      expect.objectContaining({ type: "override", policy: "rt", limit: 7 }),
    ]);
    const blocks = await plansAdmin(client, own).plans.list({
      what: "blocks",
      cursor: "0",
      count: 100,
    });
    expect(blocks.entries).toHaveLength(1);
    expect(blocks.entries[0]?.until).toBeGreaterThan(Date.now() + 50_000);
    expect((await front.stats()).refusedTime).toBe(1);
  });

  it("plans: a listing is the first script (its page's now is the caller's)", async () => {
    const own = `${prefix}-list`;
    await plansAdmin(testStore(), own).overrides.set("rt", "k", { limit: 3 });
    const { front, client } = await refusingStore();
    const page = await plansAdmin(client, own).plans.list({
      what: "overrides",
      cursor: "0",
      count: 100,
    });
    expect(page.entries).toEqual([expect.objectContaining({ limit: 3 })]);
    expect((await front.stats()).refusedTime).toBe(1);
  });

  it("network blocks: set with an end and read back (the isolates' copy)", async () => {
    const own = `${prefix}-net`;
    const { front, client } = await refusingStore();
    await plansAdmin(client, own).networks.add({ by: "asn", value: "64500", seconds: 60 });
    const read = await readNetworkBlocks(client, own);
    expect(read.entries).toEqual([{ field: "asn|*|64500", value: expect.any(String) }]);
    expect((await front.stats()).refusedTime).toBe(1);
  });

  it("refund: the first script is a refund that reads the clock (the sliding counter's)", async () => {
    const policies = [
      {
        redisKey: storageKey(prefix, "rt-refund", "k", "sliding-counter"),
        algorithm: "sliding-counter" as const,
        limit: 4,
        windowMs: 60_000,
        cost: 1,
      },
    ];
    const decided = await evaluate(testStore(), { policies, memberId: "rt-refund-1" });
    expect(decided.allowed).toBe(true);
    const { front, client } = await refusingStore();
    expect(
      await refund(client, { policies, memberId: "rt-refund-1", at: decided.now }),
    ).toMatchObject({ refunded: true, units: [1] });
    expect((await front.stats()).refusedTime).toBe(1);
  });

  it("region leases: spend, put, spend again and return on a region store that refuses TIME", async () => {
    const { front, client } = await refusingStore();
    const redisKey = storageKey(prefix, "rt-region", "k");
    const item = {
      redisKey,
      cost: 1,
      lifeMs: 5_000,
      limit: 100,
      // Warm at the first unit: this spend claims the key's next lease, which the put answers.
      minUnits: 1,
      claimMs: 2_000,
      wantLifeMs: 0,
      policy: "p",
    };
    const [miss] = await regionSpend(client, [item]);
    expect(miss).toMatchObject({ status: "miss" });
    expect(miss?.claim).toBeGreaterThan(0);
    expect(Math.abs((miss?.regionNow ?? 0) - Date.now())).toBeLessThan(60_000);
    expect((await front.stats()).refusedTime).toBe(1);
    const stamp = (miss?.regionNow ?? 0) + 10_000;
    const put = await regionPut(client, {
      redisKey,
      stamp,
      units: 5,
      endsAt: (miss?.regionNow ?? 0) + 4_500,
      claim: (miss?.regionNow ?? 0) + 2_000,
      memberId: "rt-region-1",
      resetMark: "",
      remaining: 95,
      resetAfterMs: 0,
      denyMs: 0,
      denyCost: 0,
      ttlMs: 10_000,
      policy: "p",
    });
    expect(put).toEqual({ refused: false, taken: [] });
    const [spent] = await regionSpend(client, [item]);
    expect(spent).toMatchObject({ status: "spent", stamp, left: 4 });
    expect(await regionReturn(client, redisKey, stamp, 1)).toBe(true);
    const [again] = await regionSpend(client, [item]);
    expect(again).toMatchObject({ status: "spent", left: 4 });
    // Refused once: every later region script passed the caller's clock.
    expect((await front.stats()).refusedTime).toBe(1);
    await redis.del(`${redisKey}:region`);
  });

  it("analytics: a flush is a pipeline, no script, so nothing is refused; the counts land", async () => {
    const own = `${prefix}-analytics`;
    const { front, client } = await refusingStore();
    const flushes: Promise<unknown>[] = [];
    const analytics = createAnalytics({
      store: client,
      prefix: own,
      rules: ["rt"],
      waitUntil: (p) => flushes.push(p),
    });
    const limiter = createLimiter({
      store: client,
      prefix: own,
      timeoutMs: 5_000,
      onClockChange: () => {},
      onDecision: analytics.record,
    });
    const request = { policy: "rt", key: "k", limit: 2, windowMs: 60_000 };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await limiter.limit(request)).allowed);
    expect(answers).toEqual([true, true, false]);
    await Promise.allSettled(flushes);
    const span = await analytics.stats(5, ["rt"]);
    expect(span?.rules.find((rule) => rule.rule === "rt")?.totals).toMatchObject({
      allowed: 2,
      denied: 1,
    });
    // The decisions' one refusal; the flushes and the stats read added none.
    expect((await front.stats()).refusedTime).toBe(1);
  });

  it("a script that reads TIME with no declared clock slot is refused before it is sent", async () => {
    const { front, client } = await refusingStore();
    await expect(runScript(client, "return redis.call('TIME')", [], [])).rejects.toThrow(
      /declare its clock slot/,
    );
    expect((await front.stats()).requests).toBe(0);
  });
});

describe("the clock slots the runner reads", () => {
  it("every shipped script that reads TIME declares one: ARGV[1] for the composed ones, the last for the rest", () => {
    for (const script of [...Object.values(EVALUATE_SCRIPTS), REFUND_SCRIPT]) {
      expect(clockSlotOf(script, 9)).toBe(0);
    }
    for (const script of [
      PEEK_SCRIPT,
      REGION_SPEND_SCRIPT,
      REGION_PUT_SCRIPT,
      REGION_RETURN_SCRIPT,
      REGION_FORGET_SCRIPT,
    ]) {
      expect(script).toContain("redis.call('TIME')");
      expect(clockSlotOf(script, 5)).toBe(4);
    }
  });
});

describe("a region store that refuses TIME", () => {
  it("the region switches to the isolate's clock for that store only: decided in the region, within the limit, no region failure, one line naming it", async () => {
    const { front, client } = await refusingStore();
    const home = testStore();
    const errors: unknown[] = [];
    const limiter = createLimiter({
      store: home,
      prefix,
      timeoutMs: 5_000,
      regions: { stores: { lab: client } },
      onStoreError: (error) => errors.push(error),
    });
    const request = {
      policy: "rt-lab",
      key: "k",
      limit: 40,
      windowMs: 60_000,
      lease: true,
    };
    const { value: outcomes, lines } = await captured(async () => {
      const out: { allowed: boolean; source: string }[] = [];
      for (let i = 0; i < 60; i++) {
        const pending: Promise<unknown>[] = [];
        const decided = await limiter.limitAll([request], {
          region: "lab",
          waitUntil: (p) => pending.push(p),
        });
        const only = decided.decisions[0];
        out.push({ allowed: only?.allowed ?? false, source: only?.source ?? "" });
        // The grant and put are off the request path: let them land before the next request.
        await Promise.allSettled(pending);
      }
      await limiter.endLeases();
      return out;
    });
    expect(errors).toEqual([]);
    const sources = outcomes.map((outcome) => outcome.source);
    expect(sources).toContain("region");
    // Never more than the limit in the window, home and region together.
    const admitted = outcomes.filter((outcome) => outcome.allowed).length;
    expect(admitted).toBeGreaterThan(0);
    expect(admitted).toBeLessThanOrEqual(40);
    // The region store refused once; home (a healthy store) kept its own clock.
    expect((await front.stats()).refusedTime).toBe(1);
    const clockLines = lines.filter((line) => line.includes('"store-clock"'));
    expect(clockLines, lines.join("\n")).toHaveLength(1);
    expect(JSON.parse(clockLines[0] ?? "{}")).toMatchObject({ to: "caller", region: "lab" });
    await redis.del(`${storageKey(prefix, "rt-lab", "k")}:region`);
  }, 20_000);
});
