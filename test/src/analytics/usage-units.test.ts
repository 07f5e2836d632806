// Usage rules' units and top spenders (docs/analytics.md "Usage"): each admitted request's
// reservation, then what its settle charged or gave back, counted in the minute the request was
// admitted, flushed to Redis and read back exactly; the top spenders ordered and capped at
// topKeys; a give-back never leaves a negative member; a failed flush keeps them; a sharded
// limiter's settles report too. Real Redis through the bridge, a manual clock.
import { describe, expect, it } from "vitest";
import { createAnalytics } from "../../../src/analytics/create-analytics";
import { spendKey } from "../../../src/analytics/redis-layout";
import type { AnalyticsStore, StatsRule } from "../../../src/analytics/types";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest, MultiDecision, RefundReceipt } from "../../../src/limiter/types";
import { storeAt } from "../../support/worker/fault-control";
import { scopedPrefix, TEST_DEADLINE_MS, testRedis, testStore } from "../../support/worker/redis";
import { shardPrefix, shardUrls } from "../../support/worker/shard-stores";

const filePrefix = scopedPrefix("usage-units");
const shardedPrefix = shardPrefix("usage-units-shards");
const MINUTE = 60_000;
const redis = testRedis();

const usage = (key: string, cost = 100, policy = "tokens"): LimitRequest => ({
  policy,
  key,
  limit: 1_000_000,
  windowMs: 10 * MINUTE,
  cost,
  algorithm: "sliding-log-weighted",
});

/** A limiter whose decisions and settles feed the analytics, both on a manual clock. */
function setup(
  prefix: string,
  options: { topKeys?: number; analyticsStore?: AnalyticsStore; stores?: unknown } = {},
) {
  // 1 s into a minute: a test's admissions all fall in it.
  const clock = { now: Math.floor(Date.now() / MINUTE) * MINUTE + 1_000 };
  const analytics = createAnalytics({
    store: options.analyticsStore ?? testStore(),
    prefix,
    now: () => clock.now,
    rules: ["tokens", "other", "api"],
    ...(options.topKeys !== undefined ? { topKeys: options.topKeys } : {}),
  });
  const limiter = createLimiter({
    store: (options.stores ?? testStore()) as ReturnType<typeof testStore>,
    prefix,
    clock: "caller",
    now: () => clock.now,
    timeoutMs: TEST_DEADLINE_MS,
    onDecision: analytics.record,
    onSettle: analytics.recordSettle,
  });
  const rule = async (name: string): Promise<StatsRule | undefined> =>
    (await analytics.stats(5, ["tokens", "other", "api"]))?.rules.find((r) => r.rule === name);
  return { clock, analytics, limiter, rule };
}

function receiptOf(decided: MultiDecision): RefundReceipt {
  expect(decided.allowed).toBe(true);
  if (!decided.receipt) throw new Error("no receipt");
  return decided.receipt;
}

describe("usage rules' units and top spenders", () => {
  it("counts each reservation, then each settle's delta, in the minute of admission", async () => {
    const { clock, limiter, rule } = setup(`${filePrefix}-exact`);
    const admitted = Math.floor(clock.now / MINUTE) * MINUTE;
    const a1 = receiptOf(await limiter.limitAll([usage("key-a")]));
    const a2 = receiptOf(await limiter.limitAll([usage("key-a")]));
    const b = receiptOf(await limiter.limitAll([usage("key-b")]));
    // A request id's retry is not counted again (no receipt): its reservation counts once.
    receiptOf(await limiter.limitAll([usage("key-c")], { requestId: "req-c" }));
    expect((await limiter.limitAll([usage("key-c")], { requestId: "req-c" })).replayed).toBe(true);
    // A rule without usage gets no units and no top spenders.
    await limiter.limitAll([{ policy: "api", key: "key-a", limit: 10, windowMs: MINUTE }]);

    const reserved = await rule("tokens");
    expect(reserved?.totals.units).toBe(400);
    // Five decisions admitted (the replay's answer too), four reservations taken.
    expect(reserved?.totals.allowed).toBe(5);
    expect(reserved?.minutes.at(-1)).toMatchObject({ minute: admitted, units: 400 });
    expect(reserved?.minutes[0]?.units).toBe(0);
    expect(reserved?.topSpenders).toEqual([
      { key: "key-a", units: 200 },
      { key: "key-b", units: 100 },
      { key: "key-c", units: 100 },
    ]);
    const api = await rule("api");
    expect(api?.totals.allowed).toBe(1);
    expect(api?.totals).not.toHaveProperty("units");
    expect(api?.minutes.at(-1)).not.toHaveProperty("units");
    expect(api?.topSpenders).toBeUndefined();

    // A minute later the responses end: the deltas land on the minute of admission.
    clock.now += MINUTE;
    expect(await limiter.settle(a1, 30)).toMatchObject({ status: "settled", charged: [-70] });
    expect(await limiter.settle(a2, 250)).toMatchObject({ status: "settled", charged: [150] });
    expect(await limiter.settle(b, 400)).toMatchObject({ status: "settled", charged: [300] });
    // Settled already: nothing changes, nothing counted.
    expect((await limiter.settle(b, 1)).status).toBe("already-settled");

    const settled = await rule("tokens");
    expect(settled?.totals.units).toBe(30 + 250 + 400 + 100);
    expect(settled?.minutes.at(-2)).toMatchObject({ minute: admitted, units: 780 });
    expect(settled?.minutes.at(-1)).toMatchObject({ minute: admitted + MINUTE, units: 0 });
    expect(settled?.topSpenders).toEqual([
      { key: "key-b", units: 400 },
      { key: "key-a", units: 280 },
      { key: "key-c", units: 100 },
    ]);
  });

  it("counts a settle per rule: each rule its own units, a rule left out keeps its reservation", async () => {
    const { limiter, rule } = setup(`${filePrefix}-per-rule`);
    const receipt = receiptOf(
      await limiter.limitAll([usage("key-a", 100), usage("key-b", 200, "other")]),
    );
    expect(await limiter.settle(receipt, { other: 500 })).toMatchObject({
      status: "settled",
      policies: ["other"],
      charged: [300],
    });
    expect((await rule("other"))?.topSpenders).toEqual([{ key: "key-b", units: 500 }]);
    expect((await rule("tokens"))?.topSpenders).toEqual([{ key: "key-a", units: 100 }]);
    expect((await rule("tokens"))?.totals.units).toBe(100);
  });

  it("answers at most topKeys spenders, most first; a give-back never leaves a negative member", async () => {
    const prefix = `${filePrefix}-cap`;
    const { clock, limiter, rule } = setup(prefix, { topKeys: 2 });
    const minute = Math.floor(clock.now / MINUTE);
    const receipts: RefundReceipt[] = [];
    for (const [i, cost] of [600, 500, 400, 300, 200, 100].entries()) {
      receipts.push(receiptOf(await limiter.limitAll([usage(`k${i + 1}`, cost)])));
    }
    const first = await rule("tokens");
    expect(first?.totals.units).toBe(2_100);
    expect(first?.topSpenders).toEqual([
      { key: "k1", units: 600 },
      { key: "k2", units: 500 },
    ]);
    // Redis keeps twice the answer's: a reservation ranks before its settle.
    const spend = spendKey(prefix, minute, "tokens");
    expect(await redis.zrange(spend, 0, -1)).toEqual(["k4", "k3", "k2", "k1"]);

    // k6 (trimmed away) gives its 100 back: the units fall, and no member comes back negative.
    expect((await limiter.settle(receipts[5] as RefundReceipt, 0)).charged).toEqual([-100]);
    // k1 used 50 of its 600: it leaves the top.
    expect((await limiter.settle(receipts[0] as RefundReceipt, 50)).charged).toEqual([-550]);
    const after = await rule("tokens");
    expect(after?.totals.units).toBe(2_100 - 100 - 550);
    expect(after?.topSpenders).toEqual([
      { key: "k2", units: 500 },
      { key: "k3", units: 400 },
    ]);
    expect(await redis.zscore(spend, "k6")).toBeNull();
    expect(await redis.zscore(spend, "k1")).toBe(50);
  });

  it("keeps units and spenders through a failed flush, merged with what came meanwhile", async () => {
    const real = testStore();
    let failing = true;
    let storeDown = () => {};
    const down = new Promise<void>((resolve) => {
      storeDown = resolve;
    });
    // The real store, its first pipelined call failing (the store down) only when let go: what
    // is counted while that flush is out must merge with what it gives back.
    const flaky: AnalyticsStore = {
      pipeline() {
        const pipeline = real.pipeline();
        const exec = pipeline.exec.bind(pipeline);
        pipeline.exec = ((...args: Parameters<typeof exec>) => {
          if (!failing) return exec(...args);
          failing = false;
          return down.then(() => Promise.reject(new Error("store down")));
        }) as typeof exec;
        return pipeline;
      },
    };
    const { analytics, limiter, rule } = setup(`${filePrefix}-restore`, { analyticsStore: flaky });
    const receipt = receiptOf(await limiter.limitAll([usage("key-a", 300)]));
    const flushing = analytics.flush();
    expect((await limiter.settle(receipt, 120)).charged).toEqual([-180]);
    await limiter.limitAll([usage("key-b", 100)]);
    storeDown();
    await flushing;
    expect(analytics.isolate().flushFailures).toBe(1);
    const tokens = await rule("tokens");
    expect(tokens?.totals.units).toBe(220);
    expect(tokens?.topSpenders).toEqual([
      { key: "key-a", units: 120 },
      { key: "key-b", units: 100 },
    ]);
  });

  it("counts a sharded limiter's settles, each shard's part of a request", async () => {
    const urls = shardUrls();
    const { limiter, rule } = setup(shardedPrefix, {
      analyticsStore: storeAt(urls[0] as string, TEST_DEADLINE_MS),
      stores: urls.map((url) => storeAt(url, TEST_DEADLINE_MS)),
    });
    let other = "client-1";
    for (let i = 2; limiter.shardOf(other) === limiter.shardOf("client-0"); i++) {
      other = `client-${i}`;
    }
    // One request on two shards: a "tokens" part and an "other" part.
    const decided = await limiter.limitAll([usage("client-0", 100), usage(other, 200, "other")]);
    const outcome = await limiter.settle(receiptOf(decided), 40);
    expect(outcome.status).toBe("settled");
    expect(outcome.charged.sort()).toEqual([-160, -60]);
    expect((await rule("tokens"))?.topSpenders).toEqual([{ key: "client-0", units: 40 }]);
    const otherRule = await rule("other");
    expect(otherRule?.totals.units).toBe(40);
    expect(otherRule?.topSpenders).toEqual([{ key: other, units: 40 }]);
  });
});
