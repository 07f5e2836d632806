import { describe, expect, it } from "vitest";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { refusesStoreClock } from "../../../src/limiter/store-clock";
import type { ClockChangeEvent } from "../../../src/limiter/types";
import { storageKey } from "../../../src/store/keys";
import { counting, faultScenario, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("store-clock");

describe("a store that refuses TIME in scripts", () => {
  it("switches to the caller clock by itself: Redis decides, exactly, the breaker never moves, one log line", async () => {
    const store = await faultScenario("refuse-time");
    const counted = counting(storeAt(store.url, 2_000));
    const clockEvents: ClockChangeEvent[] = [];
    const breakerEvents: BreakerEvent[] = [];
    const limiter = createLimiter({
      store: counted.store,
      prefix,
      timeoutMs: 2_000,
      breaker: { failureThreshold: 1 },
      onClockChange: (event) => clockEvents.push(event),
      onBreakerChange: (event) => breakerEvents.push(event),
    });
    const request = { policy: "rt", key: "k", limit: 5, windowMs: 60_000 };
    const decisions = [];
    for (let i = 0; i < 8; i++) decisions.push(await limiter.limit(request));
    expect(decisions.map((d) => d.allowed)).toEqual([
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
    ]);
    // Redis decided the first denial; the cache the ones after it. Never the fallback.
    // (The fifth admission left nothing: the denial cache answers from then on.)
    expect(decisions.map((d) => d.source)).toEqual([
      "redis",
      "redis",
      "redis",
      "redis",
      "redis",
      "cache",
      "cache",
      "cache",
    ]);
    expect(await logCount(redis, storageKey(prefix, "rt", "k"))).toBe(5);
    expect(breakerEvents).toEqual([]);
    expect(clockEvents).toHaveLength(1);
    expect(clockEvents[0]).toMatchObject({ event: "store-clock", from: "redis", to: "caller" });
    expect(clockEvents[0]?.error).toContain("TIME");
    // One refusal only: every later call passes the caller's clock.
    expect((await store.stats()).refusedTime).toBe(1);
  });

  it("refunds on the caller clock once switched", async () => {
    const store = await faultScenario("refuse-time");
    const limiter = createLimiter({
      store: storeAt(store.url, 2_000),
      prefix,
      timeoutMs: 2_000,
      onClockChange: () => {},
    });
    // The sliding counter's refund reads the clock (the log's does not).
    const request = {
      policy: "rt-refund",
      key: "k",
      limit: 2,
      windowMs: 60_000,
      algorithm: "sliding-counter" as const,
    };
    const outcome = await limiter.limitAll([request]);
    expect(outcome.decisions[0]?.source).toBe("redis");
    const refund = await limiter.refund(outcome.receipt as NonNullable<typeof outcome.receipt>);
    expect(refund).toMatchObject({ refunded: true, units: [1] });
  });

  it("recognises the refusal from the store's own words, not from the script text it echoes", () => {
    const echoed = `ERR wrong number of arguments, command was: ["EVAL","redis.call('TIME')"]`;
    expect(refusesStoreClock(new Error(echoed))).toBe(false);
    expect(refusesStoreClock(new Error("NOSCRIPT No matching script"))).toBe(false);
    expect(
      refusesStoreClock(
        new Error("ERR Write commands not allowed after non deterministic commands"),
      ),
    ).toBe(true);
    expect(refusesStoreClock(new Error("ERR This Redis command is not allowed from scripts"))).toBe(
      true,
    );
    expect(refusesStoreClock(new Error("Command failed: ERR TIME is disabled"))).toBe(true);
  });
});
