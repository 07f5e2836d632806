// @ts-nocheck -- tsconfig.node.json (NodeNext) cannot follow src/'s extensionless imports; vitest (Vite)
// resolves them. The code it measures is type-checked by tsconfig.json.
// Figures for the failure handling, printed as a table (no assertions on speed: these are
// measurements). See vitest.config.ts next to this file for the command.
import { performance } from "node:perf_hooks";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { createLimiter, createStoreClient, type LimiterOptions } from "../../src/index";
import { type FaultServer, startFaultServer } from "../../tools/fault-servers";

let faults: FaultServer;
const prefix = `bench-resilience-${crypto.randomUUID()}`;
const rows: [string, string][] = [];

beforeAll(async () => {
  faults = await startFaultServer();
});
afterAll(async () => {
  await faults.close();
  console.log(
    `\nFailure-handling figures\n${rows.map(([k, v]) => `  ${k.padEnd(64)} ${v}`).join("\n")}\n`,
  );
});

async function scenario(mode: string, delayMs = 0) {
  const name = `s-${crypto.randomUUID()}`;
  const set = (next: string) =>
    fetch(`${faults.url}/__control/${name}`, {
      method: "POST",
      body: JSON.stringify({ mode: next, delayMs, target: inject("bridgeUrl") }),
    }).then((r) => r.arrayBuffer());
  await set(mode);
  return { url: `${faults.url}/${name}`, set };
}

function counted(url: string, timeoutMs: number) {
  const client = createStoreClient({ url, token: inject("bridgeToken"), timeoutMs });
  let calls = 0;
  // What a limiter asks of its store: script calls, counted.
  const store: Pick<typeof client, "evalsha" | "eval"> = {
    evalsha: (sha, keys, args) => {
      calls++;
      return client.evalsha(sha, keys, args);
    },
    eval: (script, keys, args) => {
      calls++;
      return client.eval(script, keys, args);
    },
  };
  return { store, calls: () => calls };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
const ms = (value: number) => `${value.toFixed(value < 1 ? 3 : 1)} ms`;

async function latencies(n: number, check: () => Promise<unknown>, concurrency = 1) {
  const samples: number[] = [];
  for (let i = 0; i < n; i += concurrency) {
    await Promise.all(
      Array.from({ length: Math.min(concurrency, n - i) }, async () => {
        const start = performance.now();
        await check();
        samples.push(performance.now() - start);
      }),
    );
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99) };
}

it("store calls per 1000 denied requests of a flooding key", async () => {
  for (const cache of [true, false]) {
    const { store, calls } = counted(inject("bridgeUrl"), 5_000);
    const options: LimiterOptions = { store, prefix, ...(cache ? {} : { denialCache: false }) };
    const limiter = createLimiter(options);
    const req = { policy: "flood", key: `k-${cache}`, limit: 10, windowMs: 60_000 };
    for (let i = 0; i < 10; i++) await limiter.limit(req);
    const before = calls();
    let denied = 0;
    // Half sequential, half in bursts of 100 concurrent checks.
    for (let i = 0; i < 500; i++) if (!(await limiter.limit(req)).allowed) denied++;
    for (let b = 0; b < 5; b++) {
      const burst = await Promise.all(Array.from({ length: 100 }, () => limiter.limit(req)));
      denied += burst.filter((d) => !d.allowed).length;
    }
    expect(denied).toBe(1_000);
    rows.push([
      `store calls per 1000 denied checks, denial cache ${cache ? "on" : "off"}`,
      String(calls() - before),
    ]);
  }
});

it("added latency per check while the store hangs, before and after the breaker opens", async () => {
  const timeoutMs = 500;
  const hang = await scenario("hang");
  // Before: a breaker that never opens, so every check waits for the timeout.
  const never = createLimiter({
    store: counted(hang.url, timeoutMs).store,
    prefix,
    timeoutMs,
    breaker: { failureThreshold: 1_000_000 },
  });
  const before = await latencies(
    40,
    () => never.limit({ policy: "h", key: "a", limit: 5, windowMs: 60_000 }),
    10,
  );
  rows.push([
    "hung store, breaker closed (timeout 500 ms): p50 / p99",
    `${ms(before.p50)} / ${ms(before.p99)}`,
  ]);

  const { store, calls } = counted(hang.url, timeoutMs);
  const limiter = createLimiter({ store, prefix, timeoutMs });
  for (let i = 0; i < 3; i++)
    await limiter.limit({ policy: "h", key: "b", limit: 5, windowMs: 60_000 });
  const callsAtOpen = calls();
  const after = await latencies(10_000, () =>
    limiter.limit({ policy: "h", key: `b${Math.random()}`, limit: 5, windowMs: 60_000 }),
  );
  rows.push(["hung store, breaker open: p50 / p99", `${ms(after.p50)} / ${ms(after.p99)}`]);
  rows.push([
    "store calls during those 10000 checks (breaker open)",
    String(calls() - callsAtOpen),
  ]);
});

it("time to recover after the store returns", async () => {
  for (const outageMs of [100, 5_000]) {
    const store = await scenario("error-500");
    const { store: client } = counted(store.url, 500);
    const limiter = createLimiter({ store: client, prefix, timeoutMs: 500 });
    const req = { policy: "r", key: `r${outageMs}`, limit: 8_000, windowMs: 60_000 };
    // The outage: checks every 10 ms (failed probes make the cool-down grow).
    const outageEnd = performance.now() + outageMs;
    do {
      await limiter.limit(req);
      await new Promise((r) => setTimeout(r, 10));
    } while (performance.now() < outageEnd);
    await store.set("forward");
    const back = performance.now();
    for (;;) {
      const d = await limiter.limit(req);
      if (d.source === "redis") break;
      await new Promise((r) => setTimeout(r, 10));
    }
    rows.push([
      `recovery after the store returns (outage ${outageMs / 1000} s, checks every 10 ms)`,
      ms(performance.now() - back),
    ]);
  }
});
