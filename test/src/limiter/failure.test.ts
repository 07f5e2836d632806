import { Redis } from "@upstash/redis/cloudflare";
import { describe, expect, inject, it } from "vitest";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { createFallbackLimiter } from "../../../src/limiter/fallback-limiter";
import type { LimiterOptions } from "../../../src/limiter/limiter-options";
import { storageKey } from "../../../src/store/keys";
import type { ScriptClient } from "../../../src/store/script-runner";
import app from "../../../worker/worker";
import {
  counting,
  type FaultScenario,
  faultScenario,
  manualClock,
  storeAt,
} from "../../support/worker/fault-control";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("failure");
const TIMEOUT = 200;

/** A limiter whose store is a fault scenario (or any URL), configured as the worker does. */
function limiterAt(url: string, extra: Partial<LimiterOptions> = {}) {
  const counted = counting(storeAt(url, TIMEOUT));
  const events: BreakerEvent[] = [];
  const limiter = createLimiter({
    store: counted.store,
    prefix,
    timeoutMs: TIMEOUT,
    onBreakerChange: (event) => events.push(event),
    ...extra,
  });
  return { limiter, calls: counted.calls, evals: counted.evals, events };
}

const req = (key: string, extra: object = {}) => ({
  policy: "fail",
  key,
  limit: 5,
  windowMs: 60_000,
  ...extra,
});

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  const value = await work();
  return { value, ms: Date.now() - start };
}

describe("a hung store", () => {
  it("decides within the timeout (plus a margin), open by default, and the request is aborted", async () => {
    const hang = await faultScenario("hang");
    const { limiter } = limiterAt(hang.url, { fallback: false });
    const { value, ms } = await timed(() => limiter.limit(req("hung-open")));
    expect(value).toMatchObject({ allowed: true, source: "fail-open" });
    // Without a timeout the client would wait forever; the margin only absorbs a busy machine.
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT - 5);
    expect(ms).toBeLessThan(TIMEOUT + 1_000);
    // The HTTP request was aborted: the fault server saw the client hang up.
    const stats = await hang.settled();
    expect(stats).toMatchObject({ requests: 1, clientClosed: 1, pending: 0 });
  });

  it("fails closed when configured globally, or per request", async () => {
    const hang = await faultScenario("hang");
    const closed = limiterAt(hang.url, { failMode: "closed" });
    expect(await closed.limiter.limit(req("hung-closed"))).toMatchObject({
      allowed: false,
      source: "fail-closed",
    });
    const open = limiterAt(hang.url);
    expect(await open.limiter.limit(req("hung-rule", { failMode: "closed" }))).toMatchObject({
      allowed: false,
      source: "fail-closed",
    });
    const decision = await open.limiter.limit(req("hung-rule-open"));
    expect(decision).toMatchObject({ allowed: true, source: "fallback" });
  });

  it("an aborted call consumes nothing, even when the store would have answered late", async () => {
    const slow = await faultScenario("delay-forward", TIMEOUT * 3);
    const { limiter } = limiterAt(slow.url, { fallback: false });
    expect(await limiter.limit(req("late"))).toMatchObject({ source: "fail-open" });
    const stats = await slow.settled();
    // The server held the request past the timeout, found the client gone, and never relayed it.
    expect(stats).toMatchObject({ requests: 1, dropped: 1, forwarded: 0 });
    expect(await redis.exists(storageKey(prefix, "fail", "late"))).toBe(0);
  });

  it("a NOSCRIPT near the deadline: the EVAL gets only the time left, so it never counts late", async () => {
    const timeoutMs = 1_600;
    // Each request is held 1 s, then relayed if the client is still there. The EVALSHA's
    // NOSCRIPT comes back at ~1 s; an EVAL with its own full timeout would be relayed at ~2 s,
    // after the decision (fail-open at 1.6 s), and count a request nobody admitted. (Seconds,
    // not tenths: a busy machine's few hundred ms of lag must not move a step past another.)
    const slow = await faultScenario("delay-forward", 1_000);
    const client = storeAt(slow.url, timeoutMs);
    const limiter = createLimiter({
      store: {
        // A real NOSCRIPT from Redis (no script has this SHA), after the delay.
        evalsha: (_sha, keys, args) => client.evalsha("0".repeat(40), keys, args),
        eval: (script, keys, args) => client.eval(script, keys, args),
        withTimeout: (ms) => client.withTimeout(ms),
      },
      prefix,
      timeoutMs,
      fallback: false,
    });
    expect(await limiter.limit(req("noscript-late"))).toMatchObject({ source: "fail-open" });
    const stats = await slow.settled();
    // Both calls were sent; only the EVALSHA was relayed: the EVAL was aborted at the deadline.
    expect(stats).toMatchObject({ requests: 2, forwarded: 1, dropped: 1 });
    expect(await redis.exists(storageKey(prefix, "fail", "noscript-late"))).toBe(0);
  });

  it("a NOSCRIPT near the deadline through the decision's own signal: the EVAL is aborted at the deadline", async () => {
    const timeoutMs = 1_600;
    // As above, but the client takes the decision's signal (withSignal, as the worker's does):
    // one abort at the deadline covers both calls. The EVAL is sent at ~1 s and held 1 s; were
    // it not aborted at 1.6 s it would be relayed at ~2 s and count. (Seconds, as above.)
    const slow = await faultScenario("delay-forward", 1_000);
    const client = storeAt(slow.url, timeoutMs);
    let signalled = 0;
    const limiter = createLimiter({
      store: {
        evalsha: () => Promise.reject(new Error("this path must not be taken")),
        eval: () => Promise.reject(new Error("this path must not be taken")),
        withSignal: (signal) => {
          signalled++;
          const calls = (client.withSignal as NonNullable<typeof client.withSignal>)(signal);
          return {
            evalsha: (_sha, keys, args) => calls.evalsha("0".repeat(40), keys, args),
            eval: (script, keys, args) => calls.eval(script, keys, args),
          };
        },
      },
      prefix,
      timeoutMs,
      fallback: false,
    });
    expect(await limiter.limit(req("noscript-late-signal"))).toMatchObject({ source: "fail-open" });
    expect(signalled).toBe(1);
    // A pipelined client calls `signal` a tick late (when its batch goes): it offers none.
    expect(storeAt(slow.url, timeoutMs, true).withSignal).toBeUndefined();
    const stats = await slow.settled();
    expect(stats).toMatchObject({ requests: 2, forwarded: 1, dropped: 1 });
    expect(await redis.exists(storageKey(prefix, "fail", "noscript-late-signal"))).toBe(0);
  });

  it("(control) a request abandoned but not aborted does consume quota later", async () => {
    const slow = await faultScenario("delay-forward", TIMEOUT * 3);
    // The same client without its abort signal: only the limiter's deadline gives up.
    const unaborted = new Redis({
      url: slow.url,
      token: inject("bridgeToken"),
      retry: { retries: 0 },
      enableTelemetry: false,
      automaticDeserialization: false,
    });
    const limiter = createLimiter({
      // EVALSHA answers NOSCRIPT at once, so the delayed call is the EVAL (which needs no loaded
      // script: another test file may SCRIPT FLUSH at any time).
      store: {
        evalsha: () => Promise.reject(new Error("NOSCRIPT forced by the test")),
        eval: unaborted.eval.bind(unaborted),
      } as unknown as ScriptClient,
      prefix,
      timeoutMs: TIMEOUT,
      fallback: false,
    });
    expect(await limiter.limit(req("late-control"))).toMatchObject({ source: "fail-open" });
    const stats = await slow.settled();
    expect(stats).toMatchObject({ requests: 1, forwarded: 1 });
    expect(await logCount(redis, storageKey(prefix, "fail", "late-control"))).toBe(1);
  });
});

describe("refused, reset, 500, garbage", () => {
  const cases: [string, () => Promise<{ url: string; scenario?: FaultScenario }>][] = [
    ["refused", async () => ({ url: inject("refusedUrl") })],
    ["reset", async () => faultScenario("reset").then((s) => ({ url: s.url, scenario: s }))],
    ["500", async () => faultScenario("error-500").then((s) => ({ url: s.url, scenario: s }))],
    ["garbage", async () => faultScenario("garbage").then((s) => ({ url: s.url, scenario: s }))],
  ];
  for (const [name, make] of cases) {
    it(`${name}: decided at once (one attempt, no client retries), open or closed as configured`, async () => {
      const { url, scenario } = await make();
      const open = limiterAt(url, { fallback: false });
      const closed = limiterAt(url, { failMode: "closed" });
      const { value, ms } = await timed(() => open.limiter.limit(req(`${name}-open`)));
      expect(value).toMatchObject({ allowed: true, source: "fail-open" });
      expect(await closed.limiter.limit(req(`${name}-closed`))).toMatchObject({
        allowed: false,
        source: "fail-closed",
      });
      // The client's default would retry a network error 5 times over ~4.3 s.
      expect(ms).toBeLessThan(TIMEOUT + 1_000);
      if (scenario) expect((await scenario.stats()).requests).toBe(2);
    });
  }
});

describe("circuit breaker", () => {
  it("opens after consecutive failures, makes no store call while open, probes once, recovers", async () => {
    const store = await faultScenario("error-500");
    const clock = manualClock();
    const { limiter, calls, events } = limiterAt(store.url, {
      now: clock.now,
      breaker: { failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 1_500 },
    });
    for (let i = 0; i < 3; i++) await limiter.limit(req(`b${i}`));
    expect(calls()).toBe(3);
    expect(events.map((e) => e.to)).toEqual(["open"]);
    expect(events[0]).toMatchObject({ from: "closed", failures: 3, cooldownMs: 1_000 });

    // Open: 200 decisions, no store call, nothing awaited on the network.
    const open = await Promise.all(
      Array.from({ length: 200 }, (_, i) => limiter.limit(req(`o${i}`))),
    );
    expect(open.every((d) => d.source === "fallback" && d.allowed)).toBe(true);
    expect(calls()).toBe(3);
    expect((await store.stats()).requests).toBe(3);

    // After the cool-down exactly one probe goes; it fails; the cool-down grows (capped).
    clock.advance(1_000);
    await Promise.all(Array.from({ length: 20 }, (_, i) => limiter.limit(req(`p${i}`))));
    expect(calls()).toBe(4);
    expect(events.map((e) => e.to)).toEqual(["open", "half-open", "open"]);
    expect(events[2]).toMatchObject({ cooldownMs: 1_500 });
    clock.advance(1_000);
    await limiter.limit(req("still-open"));
    expect(calls()).toBe(4);

    // The store comes back: the next probe closes the breaker, and Redis decides again.
    await store.set("forward");
    clock.advance(500);
    expect(await limiter.limit(req("back"))).toMatchObject({ allowed: true, source: "redis" });
    expect(events.map((e) => e.to)).toEqual(["open", "half-open", "open", "half-open", "closed"]);
    expect(await limiter.limit(req("back"))).toMatchObject({ remaining: 3, source: "redis" });
  });

  it("only one probe is in flight; the rest decide without waiting for it", async () => {
    const store = await faultScenario("hang");
    const clock = manualClock();
    const { limiter, calls } = limiterAt(store.url, {
      now: clock.now,
      breaker: { failureThreshold: 1, cooldownMs: 1_000 },
    });
    await limiter.limit(req("first"));
    clock.advance(1_000);
    const probe = limiter.limit(req("probe"));
    const others = await Promise.all(
      Array.from({ length: 50 }, (_, i) => limiter.limit(req(`x${i}`))),
    );
    expect(others.every((d) => d.source === "fallback")).toBe(true);
    expect(calls()).toBe(2);
    expect((await probe).source).toBe("fallback");
  });

  it("logs one JSON line per state change from the worker, not one per request", async () => {
    const store = await faultScenario("error-500");
    const lines: string[] = [];
    const original = console.log;
    const originalError = console.error;
    const originalWarn = console.warn;
    console.log = (line: unknown) => lines.push(String(line));
    console.error = (line: unknown) => lines.push(String(line));
    console.warn = (line: unknown) => lines.push(String(line));
    try {
      const env = {
        UPSTASH_REDIS_REST_URL: store.url,
        UPSTASH_REDIS_REST_TOKEN: inject("bridgeToken"),
        LIMITER_TOKEN: "t",
        LIMITER_CONFIG: JSON.stringify({ timeoutMs: TIMEOUT, prefix, rules: [] }),
      };
      for (let i = 0; i < 30; i++) {
        const res = await app.fetch(
          new Request("http://limiter/check", {
            method: "POST",
            headers: { Authorization: "Bearer t", "Content-Type": "application/json" },
            body: JSON.stringify({ key: `w${i}`, limit: 5, window: "1m" }),
          }),
          env,
        );
        // Never a 500 because the store is unwell: the fallback decides.
        expect(res.status).toBe(200);
        expect(await res.json()).toMatchObject({ allowed: true, source: "fallback" });
      }
    } finally {
      console.log = original;
      console.error = originalError;
      console.warn = originalWarn;
    }
    const breakerLines = lines.filter((line) => line.includes('"circuit-breaker"'));
    expect(breakerLines).toHaveLength(1);
    expect(JSON.parse(breakerLines[0] ?? "{}")).toMatchObject({ to: "open" });
    expect((await store.stats()).requests).toBe(3);
  });
});

describe("fallback limiter", () => {
  it("admits exactly the rule's limit per isolate while the store is down, and slides", async () => {
    const store = await faultScenario("error-500");
    const clock = manualClock();
    const { limiter } = limiterAt(store.url, { now: clock.now });
    const t = clock.now();
    const decisions = [];
    for (let i = 0; i < 20; i++) {
      clock.set(t + i * 100);
      decisions.push(await limiter.limit(req("fb")));
    }
    expect(decisions.filter((d) => d.allowed)).toHaveLength(5);
    expect(decisions.every((d) => d.source === "fallback")).toBe(true);
    expect(decisions[5]).toMatchObject({ allowed: false, remaining: 0, retryAfterMs: 59_500 });
    // The first admission (t) leaves at t + 60000: one more fits then, not before.
    clock.set(t + 59_999);
    expect((await limiter.limit(req("fb"))).allowed).toBe(false);
    clock.set(t + 60_000);
    expect((await limiter.limit(req("fb"))).allowed).toBe(true);
  });

  it("a fraction of the limit, or off (then fail-open admits all)", async () => {
    const store = await faultScenario("error-500");
    const fraction = limiterAt(store.url, { fallback: { fraction: 0.4 } });
    const some = await Promise.all(
      Array.from({ length: 10 }, () => fraction.limiter.limit(req("fr"))),
    );
    expect(some.filter((d) => d.allowed)).toHaveLength(2);
    const off = limiterAt(store.url, { fallback: false });
    const all = await Promise.all(Array.from({ length: 10 }, () => off.limiter.limit(req("off"))));
    expect(all.every((d) => d.allowed && d.source === "fail-open")).toBe(true);
  });

  it("a flood of distinct keys leaves the fallback at its caps", async () => {
    const store = await faultScenario("error-500");
    const local = createFallbackLimiter({ maxKeys: 100, maxEntries: 150 });
    const { limiter } = limiterAt(store.url, { fallback: { limiter: local } });
    for (let i = 0; i < 2_000; i++) await limiter.limit(req(`flood${i}`));
    expect(local.keys).toBeLessThanOrEqual(100);
    expect(local.entries).toBeLessThanOrEqual(150);
    // A hot key keeps exactly its limit while others come and go.
    const hot = [];
    for (let i = 0; i < 10; i++) {
      hot.push(await limiter.limit(req("hot")));
      await limiter.limit(req(`churn${i}`));
    }
    expect(hot.filter((d) => d.allowed)).toHaveLength(5);
  });
});

describe("single flight against a store that stops answering", () => {
  it("a waiter whose flight failed decides at once, without a call (and a timeout) of its own", async () => {
    const store = await faultScenario("forward");
    const clock = manualClock();
    const { limiter, calls } = limiterAt(store.url, {
      clock: "caller",
      now: clock.now,
      fallback: false,
      breaker: { failureThreshold: 100 },
    });
    const request = req("single-flight-hung", { limit: 1 });
    expect(await limiter.limit(request)).toMatchObject({ allowed: true, source: "redis" });
    // The cached claim has expired, but the key was exhausted at its last answer: concurrent
    // checks wait for one flight.
    clock.advance(60_001);
    await store.set("hang");
    const before = calls();
    const decisions = await Promise.all([limiter.limit(request), limiter.limit(request)]);
    expect(decisions.map((d) => d.source)).toEqual(["fail-open", "fail-open"]);
    // One hung call: the waiter did not start a second one after the first timed out (which
    // would have made it wait two timeouts against a hung store).
    expect(calls() - before).toBe(1);
  });
});

describe("SCRIPT FLUSH mid-run", () => {
  it("surfaces no error and keeps decisions exact", async () => {
    const { limiter, evals } = limiterAt(inject("bridgeUrl"), { timeoutMs: 5_000 });
    const ask = () => limiter.limit({ policy: "flush", key: "k", limit: 50, windowMs: 60_000 });
    // Fewer than the limit before the flush: requests after it must reach the store (a full
    // key would be denied from the cache, and NOSCRIPT would never be exercised).
    const first = Array.from({ length: 30 }, ask);
    await redis.scriptFlush();
    const second = Array.from({ length: 90 }, ask);
    const decisions = await Promise.all([...first, ...second]);
    expect(decisions.every((d) => d.source === "redis" || d.source === "cache")).toBe(true);
    expect(decisions.filter((d) => d.allowed)).toHaveLength(50);
    expect(await logCount(redis, storageKey(prefix, "flush", "k"))).toBe(50);
    // The store is shared: another test's EVAL may load the script again between a flush and
    // our next call, which then meets no NOSCRIPT. Flush again (a fresh key each time, under its
    // limit: each call reaches the store) until one of ours does.
    for (let round = 0; round < 20 && evals() === 0; round++) {
      await redis.scriptFlush();
      const again = await Promise.all(
        Array.from({ length: 5 }, () =>
          limiter.limit({ policy: "flush", key: `k${round}`, limit: 50, windowMs: 60_000 }),
        ),
      );
      expect(again.every((d) => d.allowed && d.source === "redis")).toBe(true);
    }
    // The flush was seen: some EVALSHA got NOSCRIPT and the EVAL fallback ran.
    expect(evals()).toBeGreaterThanOrEqual(1);
  });
});
