// What analytics cost the store: round trips per 1000 decisions at 100 decisions/s
// in one isolate, on a manual clock; that a failed flush loses nothing; and the Redis bytes one
// rule's counts keep for a day (MEMORY USAGE after a simulated day of minutes). Figures print
// with `npm test -- --silent=false --project worker test/src/analytics/flush-cost.test.ts`.
import { describe, expect, inject, it } from "vitest";
import { createAnalytics } from "../../../src/analytics/create-analytics";
import type { AnalyticsStore } from "../../../src/analytics/types";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { LimitRequest } from "../../../src/limiter/types";
import { createStoreClient } from "../../../src/store/upstash-client";
import { faultScenario } from "../../support/worker/fault-control";
import { scopedPrefix, TEST_DEADLINE_MS, testStore } from "../../support/worker/redis";

// One prefix for the file, cleaned up after it (a hook registered inside a test never runs).
const filePrefix = scopedPrefix("flush");

/** The real store client, counting the pipelined calls (HTTP requests) it makes and their commands. */
function counting(store: AnalyticsStore) {
  const counter = { calls: 0, commands: [] as number[] };
  const wrapped: AnalyticsStore = {
    pipeline() {
      const pipeline = store.pipeline();
      const exec = pipeline.exec.bind(pipeline);
      pipeline.exec = ((...args: Parameters<typeof exec>) => {
        counter.calls++;
        counter.commands.push(pipeline.length());
        return exec(...args);
      }) as typeof exec;
      return pipeline;
    },
  };
  return { store: wrapped, counter };
}

async function bridge(command: unknown[]): Promise<unknown> {
  const res = await fetch(inject("bridgeUrl"), {
    method: "POST",
    headers: { Authorization: `Bearer ${inject("bridgeToken")}` },
    body: JSON.stringify(command),
  });
  return (await res.json<{ result: unknown }>()).result;
}

const stats = async (analytics: ReturnType<typeof createAnalytics>, rules: string[]) =>
  (await analytics.stats(60, rules))?.rules ?? [];

describe("analytics' cost to the store", () => {
  it("flushes at most every 5 s: at most 2 round trips per 1000 decisions at 100 decisions/s", async () => {
    const prefix = `${filePrefix}-cost`;
    let clock = Date.now();
    const { store, counter } = counting(testStore());
    // The recorder hands each flush to waitUntil: collect them to await them.
    const flushes: Promise<unknown>[] = [];
    const analytics = createAnalytics({
      store,
      prefix,
      now: () => clock,
      waitUntil: (p) => flushes.push(p),
    });
    const limiter = createLimiter({
      store: testStore(),
      prefix,
      clock: "caller",
      now: () => clock,
      // The counts below are the store's, not the fallback's.
      timeoutMs: TEST_DEADLINE_MS,
      onDecision: analytics.record,
    });
    const decisions = 3000;
    for (let i = 0; i < decisions; i++) {
      // 100 decisions/s; 20 clients, limit 50 a minute: some admitted, many denied (cached).
      const request: LimitRequest = {
        policy: "api",
        key: `client-${i % 20}`,
        limit: 50,
        windowMs: 60_000,
      };
      await limiter.limit(request);
      // 10 ms apart, far longer than a flush takes: let one that started finish (cached
      // denials make no I/O, so without this the loop would outrun it on the manual clock).
      if (flushes.length > 0) await flushes.at(-1);
      clock += 10;
    }
    await Promise.all(flushes);
    const duringLoad = counter.calls;
    // 30 s of decisions, a flush every 5 s (the first one 5 s after the first decision).
    expect(duringLoad).toBe(5);
    const perThousand = (duringLoad / decisions) * 1000;
    expect(perThousand).toBeLessThanOrEqual(5);
    const rules = await stats(analytics, ["api"]);
    // stats() flushed what was left in one more call (its reads are two more, not flushes).
    expect(analytics.isolate().flushes).toBe(duringLoad + 1);
    expect(counter.calls).toBe(duringLoad + 3);
    const api = rules.find((r) => r.rule === "api");
    // Every decision is in Redis once: admitted + denied = decisions.
    expect((api?.totals.allowed ?? 0) + (api?.totals.denied ?? 0)).toBe(decisions);
    expect(api?.totals.allowed).toBe(20 * 50);
    console.log(
      `analytics flushes: ${duringLoad} pipelined calls for ${decisions} decisions at 100/s = ${perThousand.toFixed(2)} per 1000 decisions`,
    );
  });

  it("counts policies outside the listed rules in one bucket: flushes and reads stay bounded", async () => {
    const prefix = `${filePrefix}-adhoc`;
    let clock = Date.now();
    const analytics = createAnalytics({
      store: testStore(),
      prefix,
      rules: ["api"],
      now: () => clock,
    });
    const decision = (policy: string, allowed: boolean) => ({
      allowed,
      limit: 1,
      remaining: 0,
      reset: 0,
      resetAfterMs: 0,
      retryAfterMs: 0,
      source: "redis" as const,
      policy,
      windowMs: 60_000,
      algorithm: "sliding-log" as const,
    });
    // An hour of 64 new ad-hoc windows a minute, each decided twice (admitted, then denied).
    for (let minute = 0; minute < 60; minute++) {
      for (let w = 0; w < 64; w++) {
        const policy = `check.${60_000 + minute * 64 + w}ms`;
        const request = { policy, key: `client-${w}`, limit: 1, windowMs: 60_000 };
        for (const allowed of [true, false]) {
          analytics.record([request], {
            allowed,
            replayed: false,
            decisions: [decision(policy, allowed)],
          });
        }
      }
      analytics.record([{ policy: "api", key: "k", limit: 1, windowMs: 60_000 }], {
        allowed: true,
        replayed: false,
        decisions: [decision("api", true)],
      });
      await analytics.flush();
      clock += 60_000;
    }
    clock -= 60_000;
    const { store, counter } = counting(testStore());
    const reader = createAnalytics({ store, prefix, rules: ["api"], now: () => clock });
    const span = await reader.stats(60, ["api"]);
    const rules = span?.rules ?? [];
    console.log(
      `stats after an hour of 64 ad-hoc windows a minute: ${rules.length} rules, ${JSON.stringify(span).length} B, commands per read ${counter.commands.join(" + ")}`,
    );
    expect(rules.map((r) => r.rule)).toEqual(["api", "(ad-hoc)"]);
    expect(rules[1]?.totals).toMatchObject({ allowed: 60 * 64, denied: 60 * 64 });
    expect(rules[1]?.topDenied).toHaveLength(10);
    // Two reads: an HMGET per minute, then a ZUNION per listed rule (3 777 of them before).
    expect(counter.commands).toEqual([60, 2]);
    // Each minute's hash holds two rules' fields, not 64 windows'.
    const fields = (await bridge([
      "HKEYS",
      `${prefix}:analytics:${Math.floor(clock / 60_000)}`,
    ])) as string[];
    expect(new Set(fields.map((field) => field.split("|")[0]))).toEqual(
      new Set(["api", "(ad-hoc)"]),
    );
  }, 60_000);

  it("a flush the store refuses keeps its counts for the next one", async () => {
    const prefix = `${filePrefix}-retry`;
    const scenario = await faultScenario("error-500");
    const store = createStoreClient({
      url: scenario.url,
      token: inject("bridgeToken"),
      timeoutMs: 2_000,
    });
    const errors: unknown[] = [];
    const analytics = createAnalytics({ store, prefix, onFlushError: (e) => errors.push(e) });
    const request: LimitRequest = { policy: "api", key: "k", limit: 2, windowMs: 60_000 };
    const allowed = { allowed: true, replayed: false };
    const decision = {
      allowed: true,
      limit: 2,
      remaining: 1,
      reset: 0,
      resetAfterMs: 0,
      retryAfterMs: 0,
      source: "redis" as const,
      policy: "api",
      windowMs: 60_000,
      algorithm: "sliding-log" as const,
    };
    for (let i = 0; i < 4; i++) analytics.record([request], { ...allowed, decisions: [decision] });
    await analytics.flush();
    expect(errors).toHaveLength(1);
    expect(analytics.isolate()).toMatchObject({ flushes: 1, flushFailures: 1, decisions: 4 });
    await scenario.set("forward");
    const rules = await stats(analytics, ["api"]);
    expect(rules.find((r) => r.rule === "api")?.totals.allowed).toBe(4);
  });

  it("keeps a few hundred bytes per rule per minute: the figure for a day", async () => {
    const prefix = `${filePrefix}-bytes`;
    // A day ending now, a minute at a time, for 1 rule and for 10 rules (they share a hash).
    const measure = async (ruleCount: number, label: string) => {
      const dayPrefix = `${prefix}-${label}`;
      const end = Date.now();
      let clock = end - 1439 * 60_000;
      const analytics = createAnalytics({
        store: testStore(),
        prefix: dayPrefix,
        now: () => clock,
      });
      const decision = (policy: string, allowed: boolean, source: "redis" | "cache") => ({
        allowed,
        limit: 100,
        remaining: 0,
        reset: 0,
        resetAfterMs: 0,
        retryAfterMs: 0,
        source,
        policy,
        windowMs: 60_000,
        algorithm: "sliding-log" as const,
      });
      for (let minute = 0; minute < 1440; minute++) {
        for (let r = 0; r < ruleCount; r++) {
          const policy = `rule-${r}`;
          // Realistic magnitudes (multi-digit counts), allowed and denied from both sources, and
          // 10 distinct denied keys (the most kept) of IPv4 length.
          for (let k = 0; k < 10; k++) {
            const key = `203.0.113.${k}`;
            const request = { policy, key, limit: 100, windowMs: 60_000 };
            analytics.record([request], {
              allowed: true,
              replayed: false,
              decisions: [decision(policy, true, "redis")],
            });
            analytics.record([request], {
              allowed: false,
              replayed: false,
              decisions: [decision(policy, false, k % 2 ? "cache" : "redis")],
            });
          }
        }
        await analytics.flush();
        clock += 60_000;
      }
      const keys = (await bridge(["KEYS", `${dayPrefix}:analytics:*`])) as string[];
      let counts = 0;
      let tops = 0;
      let liveTops = 0;
      let gone = 0;
      for (const key of keys) {
        const ttl = Number(await bridge(["PTTL", key]));
        // The oldest top-key set can expire (in real time) between KEYS and here: not a leak.
        if (ttl === -2) {
          gone++;
          continue;
        }
        expect(ttl, key).toBeGreaterThan(0);
        const bytes = Number(await bridge(["MEMORY", "USAGE", key, "SAMPLES", "0"]));
        if (key.includes(":top:")) {
          tops += bytes;
          liveTops++;
        } else counts += bytes;
      }
      return { counts, tops, liveTops, keys: keys.length - gone };
    };
    const one = await measure(1, "one");
    const ten = await measure(10, "ten");
    // Counts: one hash a minute for the day; top keys: only the last 62 minutes' sets live.
    expect(one.keys).toBe(1440 + one.liveTops);
    expect(one.liveTops).toBeLessThanOrEqual(63);
    const perRuleDay = (m: typeof one, n: number) => Math.round((m.counts + m.tops) / n);
    console.log(
      [
        `analytics bytes kept per rule for a day (MEMORY USAGE, SAMPLES 0):`,
        `  1 rule:   counts ${one.counts} B (1440 hashes) + top keys ${one.tops} B (${one.liveTops} live sets) = ${perRuleDay(one, 1)} B`,
        `  10 rules: counts ${ten.counts} B + top keys ${ten.tops} B (${ten.liveTops} sets) = ${perRuleDay(ten, 10)} B per rule`,
      ].join("\n"),
    );
    expect(perRuleDay(one, 1)).toBeLessThan(1_000_000);
  }, 120_000);
});
