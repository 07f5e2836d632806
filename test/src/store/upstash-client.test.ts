import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { storageKey } from "../../../src/store/keys";
import { faultScenario, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("upstash-client");

// What reaches the store from each client createStoreClient hands out: the decision
// scripts ask for no base64 and no read-your-writes token (their replies are integers and they
// run on the primary), the client itself (analytics and admin reads) keeps both.
describe("createStoreClient's requests", () => {
  it("a decision (withSignal's client) sends neither Upstash-Encoding nor a sync token", async () => {
    const scenario = await faultScenario("forward");
    const store = storeAt(scenario.url, 500);
    expect(store.withSignal).toBeTypeOf("function");
    const limiter = createLimiter({ store, prefix, timeoutMs: 500, denialCache: false });
    const request = { policy: "lean", key: "k", limit: 2, windowMs: 60_000 };
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await limiter.limit(request));
    expect(answers.map((d) => [d.allowed, d.source])).toEqual([
      [true, "redis"],
      [true, "redis"],
      [false, "redis"],
    ]);
    expect(answers.map((d) => d.remaining)).toEqual([1, 0, 0]);
    expect(await logCount(redis, storageKey(prefix, "lean", "k"))).toBe(2);
    const stats = await scenario.stats();
    expect(stats.forwarded).toBeGreaterThanOrEqual(3);
    expect(stats.headers).toBeUndefined();
  });

  it("withTimeout's client is as lean; the client itself keeps base64 and the sync token", async () => {
    const scenario = await faultScenario("forward");
    const store = storeAt(scenario.url, 500);
    expect(await store.withTimeout(200).eval("return {1, 2}", [], [])).toEqual([1, 2]);
    expect((await scenario.stats()).headers).toBeUndefined();

    const key = `${prefix}:plain`;
    await redis.set(key, "ünïcode", { ex: 60 });
    expect(await store.get(key)).toBe("ünïcode");
    expect((await scenario.stats()).headers).toEqual({
      "upstash-encoding": 1,
      "upstash-sync-token": 1,
    });
    await redis.del(key);
  });
});
