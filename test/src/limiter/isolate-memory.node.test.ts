import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { build } from "esbuild";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// What the per-isolate caches really keep on the V8 heap when a client sends large keys: the
// worker tests (workerd has no heap API) check each structure's accounted bytes; this measures
// the heap itself, in Node's V8 (the engine workerd embeds), with src/ bundled as the worker
// bundles it. Figures print with `npm test -- --silent=false --project node
// test/src/limiter/isolate-memory.node.test.ts`.

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

const dir = mkdtempSync(join(tmpdir(), "edge-limiter-heap-"));
// biome-ignore lint/suspicious/noExplicitAny: the bundle's exports are whatever src/ exports
let lib: any;

beforeAll(async () => {
  const outfile = join(dir, "bundle.mjs");
  await build({
    stdin: {
      contents: `
        export { clientKey, headerKeyCacheBytes } from "./src/rules/client-key";
        export { createDenialCache } from "./src/limiter/denial-cache";
        export { createFallbackLimiter } from "./src/limiter/fallback-limiter";
        export { createSingleFlight } from "./src/limiter/single-flight";
        export { createLeaseKeys } from "./src/limiter/leases/isolate-lease-keys";
        export { resolvePolicy, withStorageKeys } from "./src/limiter/resolved-policy";
        export { Aggregate } from "./src/analytics/aggregate";
      `,
      resolveDir: join(import.meta.dirname, "../../.."),
      loader: "ts",
    },
    bundle: true,
    format: "esm",
    platform: "neutral",
    outfile,
    logLevel: "error",
  });
  lib = await import(outfile);
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Heap in use after full collections (bytes). */
function heapUsed(): number {
  gc();
  gc();
  return getHeapStatistics().used_heap_size;
}

const MB = 1_000_000;

const ip = { trustedProxyHops: 1, ipv6PrefixLength: 64, ipv4PrefixLength: 32 };
/** A distinct string of `length` characters, numbered `i`. */
const big = (i: number, length: number, fill = "k") =>
  `${String(i).padStart(8, "0")}${fill.repeat(length - 8)}`;

describe("per-isolate memory under large keys (real V8 heap)", () => {
  beforeAll(async () => {
    // Compiled code and the first Headers are not what the caches hold.
    for (let i = 0; i < 50; i++) {
      await lib.clientKey("header:x-warm", new Headers({ "X-Warm": big(i, 20) }), ip);
    }
  });

  it("1 100 distinct 32 KB X-API-Key values: the header-key hash cache retains under 1 MB", async () => {
    const before = heapUsed();
    for (let i = 0; i < 1_100; i++) {
      const headers = new Headers({ "X-API-Key": big(i, 32 * 1024) });
      await lib.clientKey("header:x-api-key", headers, ip);
    }
    const retained = heapUsed() - before;
    console.log(`header-key cache, 1 100 × 32 KB keys: ${(retained / MB).toFixed(1)} MB retained`);
    expect(retained).toBeLessThan(1 * MB);
  });

  it("1 100 short keys each cut from a 32 KB header: the cache keeps copies, not the headers", async () => {
    const before = heapUsed();
    for (let i = 0; i < 1_100; i++) {
      // The first element is the key (what origins read); the rest of the header is junk.
      const headers = new Headers({ "X-Cut-Key": `${big(i, 40)}, ${"j".repeat(32 * 1024)}` });
      await lib.clientKey("header:x-cut-key", headers, ip);
    }
    const retained = heapUsed() - before;
    console.log(
      `header-key cache, 1 100 × 40-char keys cut from 32 KB headers: ${(retained / MB).toFixed(2)} MB retained, ${lib.headerKeyCacheBytes()} B accounted`,
    );
    expect(retained).toBeLessThan(lib.headerKeyCacheBytes());
  });

  it("the denial cache, past its 4 MiB with 512-character keys, retains no more than it accounts", () => {
    const cache = lib.createDenialCache();
    const before = heapUsed();
    for (let i = 0; i < 20_000; i++) {
      cache.remember(
        big(i, 512),
        { minCost: 1, remaining: 0, until: 2e12 + i, retryAt: 2e12 + i },
        0,
      );
    }
    const retained = heapUsed() - before;
    console.log(
      `denial cache, 20 000 × 512-char keys: ${cache.size} kept, ${(retained / MB).toFixed(2)} MB retained, ${(cache.bytes / MB).toFixed(2)} MB accounted`,
    );
    expect(cache.bytes).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(retained).toBeLessThan(cache.bytes);
  });

  it("the fallback's logs and reports, past 4 MiB each, retain no more than they account", () => {
    const fallback = lib.createFallbackLimiter();
    const before = heapUsed();
    for (let i = 0; i < 20_000; i++) {
      fallback.note(big(i, 512, "r"), 5, 60_000, 1_000);
      for (let j = 0; j < 3; j++) fallback.limit(big(i, 512, "l"), 10, 60_000, 1, 1_000 + j);
    }
    const retained = heapUsed() - before;
    const { logs, reports } = fallback.bytes;
    console.log(
      `fallback, 20 000 × 512-char keys, 3 admissions each: ${fallback.keys} logs, ${(retained / MB).toFixed(2)} MB retained, ${((logs + reports) / MB).toFixed(2)} MB accounted`,
    );
    expect(logs).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(reports).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(retained).toBeLessThan(logs + reports);
  });

  it("single flight: leaders that never settle, past 2 MiB, retain no more than it accounts", () => {
    const flights = lib.createSingleFlight({ timeoutMs: 500, now: () => 0 });
    const before = heapUsed();
    for (let i = 0; i < 20_000; i++) flights.lead(big(i, 512), new Promise(() => {}), 0);
    const retained = heapUsed() - before;
    console.log(
      `single flight, 20 000 lost flights × 512-char keys: ${flights.size} kept, ${(retained / MB).toFixed(2)} MB retained, ${(flights.bytes / MB).toFixed(2)} MB accounted`,
    );
    expect(flights.bytes).toBeLessThanOrEqual(2 * 1024 * 1024);
    expect(retained).toBeLessThan(flights.bytes);
  });

  it("lease state, past 8 MiB with 512-character keys and built Redis keys, retains no more than it accounts", () => {
    const keys = lib.createLeaseKeys(10_000, () => {});
    const before = heapUsed();
    for (let i = 0; i < 20_000; i++) {
      // A key of 2-byte characters: its Redis key is percent-encoded, 9 characters each.
      const policy = lib.resolvePolicy(
        { policy: "api", key: big(i, 512, "\u4e2d"), limit: 100, windowMs: 60_000, lease: true },
        "open",
      );
      lib.withStorageKeys([policy], "edge-limiter");
      const state = keys.stateOf(policy.cacheKey, 0);
      state.policy = policy;
      keys.account(policy.cacheKey);
    }
    const retained = heapUsed() - before;
    console.log(
      `lease state, 20 000 × 512-char keys: ${(retained / MB).toFixed(2)} MB retained, ${(keys.bytes / MB).toFixed(2)} MB accounted`,
    );
    expect(keys.bytes).toBeLessThanOrEqual(8 * 1024 * 1024);
    expect(retained).toBeLessThan(keys.bytes);
  });

  it("analytics' top denied keys keep copies: 200 keys cut from 1 MB headers retain no megabytes", () => {
    const aggregate = new lib.Aggregate(1_000);
    const before = heapUsed();
    for (let i = 0; i < 200; i++) {
      const header = big(i, 1_000_000);
      aggregate.add(1, "api", "denied", "redis", header.slice(0, 100));
    }
    const retained = heapUsed() - before;
    console.log(
      `analytics top keys, 200 × 100 chars cut from 1 MB strings: ${(retained / MB).toFixed(2)} MB retained`,
    );
    expect(aggregate.size).toBeGreaterThan(0);
    expect(retained).toBeLessThan(5 * MB);
  });

  it("a key cut from a 1 MB string is copied when resolved: 200 policies retain no megabytes", () => {
    const kept = [];
    const before = heapUsed();
    for (let i = 0; i < 200; i++) {
      const huge = big(i, 1_000_000);
      kept.push(
        lib.resolvePolicy(
          { policy: "api", key: huge.slice(0, 100), limit: 10, windowMs: 1_000 },
          "open",
        ),
      );
    }
    const retained = heapUsed() - before;
    console.log(
      `200 policies keyed by 100 chars cut from 1 MB strings: ${(retained / MB).toFixed(2)} MB retained`,
    );
    expect(kept).toHaveLength(200);
    // (The last 1 MB string may still be on the stack; the 200 parents are 200 MB.)
    expect(retained).toBeLessThan(5 * MB);
  });
});
