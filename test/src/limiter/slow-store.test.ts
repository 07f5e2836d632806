import { describe, expect, it } from "vitest";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimiterOptions } from "../../../src/limiter/limiter-options";
import { storageKey } from "../../../src/store/keys";
import { faultScenario, manualClock, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("slow-store");
const TIMEOUT = 150;

function limiterAt(url: string, extra: Partial<LimiterOptions> = {}) {
  const events: BreakerEvent[] = [];
  const timeoutMs = extra.timeoutMs ?? TIMEOUT;
  const limiter = createLimiter({
    store: storeAt(url, timeoutMs),
    prefix,
    timeoutMs,
    onBreakerChange: (event) => events.push(event),
    ...extra,
  });
  return { limiter, events };
}

const req = (key: string, extra: object = {}) => ({
  policy: "slow",
  key,
  limit: 10,
  windowMs: 60_000,
  ...extra,
});

describe("slow is not dead", () => {
  it("the fallback starts a key from what Redis last reported, not from a full budget", async () => {
    // Every answer comes back past the timeout, but Redis has run (and counted) every script.
    const store = await faultScenario("forward");
    const { limiter } = limiterAt(store.url);
    const admitted = [];
    for (let i = 0; i < 6; i++) admitted.push(await limiter.limit(req("seeded")));
    expect(admitted.every((d) => d.allowed && d.source === "redis")).toBe(true);

    await store.set("late-answer", TIMEOUT * 2);
    const during = [];
    for (let i = 0; i < 12; i++) during.push(await limiter.limit(req("seeded")));
    await store.settled();
    const locallyAdmitted = during.filter((d) => d.allowed).length;
    // Redis said 4 were left: the fallback hands out at most those 4 (a full budget gave 10).
    expect(locallyAdmitted).toBe(4);
    expect(during.filter((d) => d.allowed).every((d) => d.source !== "redis")).toBe(true);
    // The late scripts sent before the breaker opened counted in Redis as well: three, and on a
    // busy machine a half-open probe may add one (the cooldown passes while the timers run
    // late). Redis never goes past the limit, and the 4 local admissions were not handed out
    // on top of a full budget.
    const counted = await logCount(redis, storageKey(prefix, "slow", "seeded"));
    expect(counted).toBeGreaterThanOrEqual(9);
    expect(counted).toBeLessThanOrEqual(10);
  });

  it("a key Redis reported exhausted stays denied by the fallback until its window frees", async () => {
    const store = await faultScenario("forward");
    const clock = manualClock();
    const { limiter } = limiterAt(store.url, {
      now: clock.now,
      denialCache: false,
      clock: "caller",
    });
    for (let i = 0; i < 10; i++) expect((await limiter.limit(req("full"))).allowed).toBe(true);
    await store.set("error-500");
    const denied = await limiter.limit(req("full"));
    expect(denied).toMatchObject({ allowed: false, source: "fallback" });
    expect(denied.retryAfterMs).toBeGreaterThan(0);
    expect(denied.retryAfterMs).toBeLessThanOrEqual(60_000);
    // Once everything Redis had counted has left the window, the fallback admits again.
    clock.advance(60_000);
    expect(await limiter.limit(req("full"))).toMatchObject({ allowed: true, source: "fallback" });
  });

  it("timeouts while the store answers other calls do not open the breaker", async () => {
    // Three requests in four are answered late (past the timeout), every fourth at once.
    const store = await faultScenario("mostly-late", TIMEOUT * 2);
    const { limiter, events } = limiterAt(store.url, { breaker: { failureThreshold: 3 } });
    const pause = () => new Promise((resolve) => setTimeout(resolve, 10));
    for (let round = 0; round < 2; round++) {
      // Separate HTTP requests (the client pipelines calls made in one tick into one): three
      // slow calls are out when the fourth is answered, and then they time out one after another.
      const slow = [];
      for (let i = 0; i < 3; i++) {
        slow.push(limiter.limit(req(`slow-${round}-${i}`)));
        await pause();
      }
      expect(await limiter.limit(req(`fast-${round}`))).toMatchObject({ source: "redis" });
      for (const decision of await Promise.all(slow)) expect(decision.source).toBe("fallback");
    }
    await store.settled();
    expect(events).toEqual([]);
  });

  it("(control) a store that answers nothing in time still opens the breaker", async () => {
    const store = await faultScenario("late-answer", TIMEOUT * 2);
    const { limiter, events } = limiterAt(store.url, { breaker: { failureThreshold: 3 } });
    for (let i = 0; i < 3; i++) await limiter.limit(req(`dead-${i}`));
    await store.settled();
    expect(events.map((e) => e.to)).toEqual(["open"]);
  });
});

describe("reset", () => {
  it("an answer in flight during a reset does not re-cache a denial of the key", async () => {
    const store = await faultScenario("forward");
    const { limiter } = limiterAt(store.url, { timeoutMs: 5_000 });
    // One of two used: nothing cached yet.
    const request = req("reset-race", { limit: 2, cost: 2 });
    await limiter.limit(req("reset-race", { limit: 2 }));
    // Redis runs the script at once (denied), and the answer arrives 200 ms later…
    await store.set("late-answer", 200);
    const inFlight = limiter.limit(request);
    while (!(await store.stats()).answered) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // …after an admin reset of the key (what /check/reset does: UNLINK, then forget).
    await redis.unlink(storageKey(prefix, "slow", "reset-race"));
    limiter.forget(request);
    expect(await inFlight).toMatchObject({ allowed: false, source: "redis" });
    await store.set("forward");
    // The key is empty in Redis: the next check is asked of Redis, not denied from the cache.
    expect(await limiter.limit(request)).toMatchObject({ allowed: true, source: "redis" });
  });
});

describe("fallback share and cost", () => {
  it("a request costing more than the isolate's share is admitted when nothing else is in its window", async () => {
    const store = await faultScenario("error-500");
    const clock = manualClock();
    const { limiter } = limiterAt(store.url, {
      now: clock.now,
      fallback: { fraction: 0.1 },
      breaker: { failureThreshold: 1 },
    });
    // Share: 10 % of 50 = 5; the request costs 20 (≤ the rule's limit, so Redis could admit it).
    const big = req("share", { limit: 50, cost: 20 });
    expect(await limiter.limit(big)).toMatchObject({ allowed: true, source: "fallback" });
    expect(await limiter.limit(big)).toMatchObject({ allowed: false, source: "fallback" });
    expect(await limiter.limit(req("share", { limit: 50 }))).toMatchObject({ allowed: false });
    clock.advance(60_000);
    expect(await limiter.limit(big)).toMatchObject({ allowed: true, source: "fallback" });
  });
});
