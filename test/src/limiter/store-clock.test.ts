import { describe, expect, it, vi } from "vitest";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { refusesStoreClock } from "../../../src/limiter/clock-policy";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { storageKey } from "../../../src/store/keys";
import { peekQuota } from "../../../src/store/peek-reset";
import { readNetworkBlocks } from "../../../src/store/plan-reads";
import type { ClockChangeEvent } from "../../../src/store/store-clock";
import { counting, faultScenario, storeAt } from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { plansAdmin } from "../../support/worker/plans-admin";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { postCheck, TEST_ADMIN_TOKEN, workerWith } from "../../support/worker/worker-harness";

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

  it("plans work on such a store: blocks with an end, the network copy, limits overridden", async () => {
    const store = await faultScenario("refuse-time");
    const client = storeAt(store.url, 2_000);
    const own = `${prefix}-plans`;
    expect(
      await plansAdmin(client, own).networks.add({ by: "country", value: "XX", seconds: 60 }),
    ).toEqual({
      ok: true,
      existed: false,
      value: "XX",
    });
    const read = await readNetworkBlocks(client, own);
    expect(read.entries).toEqual([{ field: "country|*|XX", value: expect.any(String) }]);
    expect(Number(read.entries[0]?.value)).toBeGreaterThan(Date.now() + 50_000);
    await plansAdmin(client, own).overrides.set("rt-plan", "k", { limit: 1 });
    const limiter = createLimiter({
      store: client,
      prefix: own,
      timeoutMs: 2_000,
      onClockChange: () => {},
    });
    const request = { policy: "rt-plan", key: "k", limit: 5, windowMs: 60_000, overrides: true };
    expect(await limiter.limit(request)).toMatchObject({
      allowed: true,
      limit: 1,
      source: "redis",
    });
    // (The denial cache answers it, with the limit the store decided by.)
    expect(await limiter.limit(request)).toMatchObject({
      allowed: false,
      limit: 1,
      source: "cache",
    });
    // Refused once, by the first script that met it.
    expect((await store.stats()).refusedTime).toBe(1);
    await plansAdmin(client, own).networks.remove({ by: "country", value: "XX" });
    await plansAdmin(client, own).overrides.remove("rt-plan", "k");
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
    // Redis 7 on a store that flags TIME as not for scripts (ElastiCache Serverless).
    expect(
      refusesStoreClock(
        new Error(
          "ERR This Redis command is not allowed from script script: b0e7…, on @user_script:1.",
        ),
      ),
    ).toBe(true);
    // Errors that merely mention time are not the store refusing its clock: a window too long
    // for PEXPIRE, a WRONGTYPE, a timeout.
    expect(refusesStoreClock(new Error("ERR invalid expire time in 'pexpire' command"))).toBe(
      false,
    );
    expect(
      refusesStoreClock(new Error("ERR Error running script: invalid expire time in 'set'")),
    ).toBe(false);
    expect(refusesStoreClock(new Error("store did not answer within 500 ms (time out)"))).toBe(
      false,
    );
    expect(refusesStoreClock(new Error("ERR value is not an integer or out of range"))).toBe(false);
  });
});

describe("one clock policy per store: every script the worker runs follows the switch", () => {
  it("a peek on the store's clock sees the refusal, and switches the limiter sharing its client", async () => {
    const store = await faultScenario("refuse-time");
    const client = storeAt(store.url, 2_000);
    const quota = { prefix, policy: "rt-peek", key: "k", limit: 3, windowMs: 60_000 };
    // No `now`: the peek asks for the Redis clock, as the admin route does by default.
    expect(await peekQuota(client, quota)).toMatchObject({ allowed: true, remaining: 3 });
    expect((await store.stats()).refusedTime).toBe(1);
    const clockEvents: ClockChangeEvent[] = [];
    const limiter = createLimiter({
      store: client,
      prefix,
      timeoutMs: 2_000,
      onClockChange: (event) => clockEvents.push(event),
    });
    const decision = await limiter.limit({ ...quota, key: quota.key });
    expect(decision).toMatchObject({ allowed: true, source: "redis", remaining: 2 });
    // The limiter's first call already passed the caller's clock: no second refusal.
    expect((await store.stats()).refusedTime).toBe(1);
    // Its own handler still hears that its clock is the caller's, once.
    expect(clockEvents).toHaveLength(1);
    expect(await peekQuota(client, quota)).toMatchObject({ allowed: true, remaining: 2 });
    expect((await store.stats()).refusedTime).toBe(1);
  });

  it("a limiter's switch is the peek's: the peek after it passes the caller's clock", async () => {
    const store = await faultScenario("refuse-time");
    const client = storeAt(store.url, 2_000);
    const limiter = createLimiter({ store: client, prefix, timeoutMs: 2_000, onClockChange() {} });
    const request = { policy: "rt-peek2", key: "k", limit: 3, windowMs: 60_000 };
    expect(await limiter.limit(request)).toMatchObject({ allowed: true, source: "redis" });
    expect((await store.stats()).refusedTime).toBe(1);
    expect(await peekQuota(client, { prefix, ...request })).toMatchObject({ remaining: 2 });
    expect((await store.stats()).refusedTime).toBe(1);
  });

  it("the worker against such a store: peek (npm start's readiness probe), check, reset and stats answer; no log line carries a script", async () => {
    const store = await faultScenario("refuse-time");
    const worker = workerWith({
      UPSTASH_REDIS_REST_URL: store.url,
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [],
        timeoutMs: 5_000,
        analytics: { enabled: true },
      }),
    });
    const lines: string[] = [];
    const capture = (...args: unknown[]) => lines.push(args.map(String).join(" "));
    const spies = (["log", "warn", "error"] as const).map((level) =>
      vi.spyOn(console, level).mockImplementation(capture),
    );
    try {
      const body = { key: `rt-worker-${crypto.randomUUID()}`, limit: 2, window: "1m" };
      const peek = await postCheck(worker, body, { path: "/check/peek" });
      expect(peek.status, await peek.clone().text()).toBe(200);
      expect(await peek.json()).toMatchObject({ allowed: true, remaining: 2 });
      const check = await postCheck(worker, body);
      expect(await check.json()).toMatchObject({ allowed: true, source: "redis", remaining: 1 });
      const after = await postCheck(worker, body, { path: "/check/peek" });
      expect(await after.json()).toMatchObject({ remaining: 1 });
      const reset = await postCheck(worker, body, { path: "/check/reset" });
      expect(await reset.json()).toMatchObject({ reset: true, existed: true });
      const stats = await worker("/check/stats", {
        headers: { Authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      });
      expect(stats.status).toBe(200);
      await stats.body?.cancel();
      const dashboard = await worker("/check/dashboard", {
        headers: { Authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      });
      expect(dashboard.status).toBe(200);
      await dashboard.body?.cancel();
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
    // The store refused TIME once (the first script of this store client), and said so once.
    expect((await store.stats()).refusedTime).toBe(1);
    const clockLines = lines.filter((line) => line.includes('"store-clock"'));
    expect(clockLines, lines.join("\n")).toHaveLength(1);
    for (const line of lines) {
      expect(line.length, line.slice(0, 200)).toBeLessThanOrEqual(1_200);
      expect(line).not.toContain("redis.call(");
    }
  });
});
