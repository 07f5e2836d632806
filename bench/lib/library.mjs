// @ts-check
// The library-level view, in Node: our limiter (built from src/ by esbuild, through the same
// getRuntime() the worker uses, so the denial cache, breaker and fallback come along as they
// land) against @upstash/ratelimit, each through its real @upstash/redis client.
import { createHash } from "node:crypto";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { ROOT } from "../../tools/infra.mjs";

/**
 * @typedef {{ allowed: boolean, source: string }} LibDecision
 * @typedef {(key: string, limit: number, windowMs: number, cost?: number) => Promise<LibDecision>} LibLimit
 */

/**
 * For bundles run in Node: `cloudflare:workers` (workerd's built-in module) as a stand-in whose
 * waitUntil lets the promise run on (Node keeps the process alive for it).
 * @type {import("esbuild").Plugin}
 */
export const cloudflareWorkersStub = {
  name: "cloudflare-workers-stub",
  setup(b) {
    b.onResolve({ filter: /^cloudflare:workers$/ }, () => ({
      path: "cloudflare:workers",
      namespace: "stub",
    }));
    b.onLoad({ filter: /.*/, namespace: "stub" }, () => ({
      contents:
        "export const waitUntil = (p) => { Promise.resolve(p).catch(() => {}); };\n" +
        "export const env = {};\n",
      loader: "js",
    }));
  },
};

/**
 * Bundles worker/runtime.ts plus the anchor's modules into one Node ESM file and imports it.
 * @param {string} tmp
 */
export function loadLibraries(tmp) {
  return bundleForNode(tmp, "library", [
    `export { getRuntime } from "./worker/runtime.ts";`,
    // The rate algorithms only: a concurrency rule takes no ad-hoc limit and window in /check
    // (bench/concurrency.mjs measures it, against a slow origin).
    `export { RATE_ALGORITHMS as ALGORITHMS } from "./src/store/algorithm.ts";`,
    `export { Ratelimit } from "@upstash/ratelimit";`,
    `export { Redis } from "@upstash/redis/cloudflare";`,
  ]);
}

/**
 * Bundles an entry of `exports` lines (paths from the project's root) into `<tmp>/<name>.mjs`,
 * one Node ESM file with its own copy of every module (module-level state included), and
 * imports it.
 * @param {string} tmp
 * @param {string} name
 * @param {string[]} exports
 * @returns {Promise<any>}
 */
export async function bundleForNode(tmp, name, exports) {
  const outfile = path.join(tmp, `${name}.mjs`);
  await build({
    stdin: {
      contents: exports.join("\n"),
      resolveDir: ROOT,
      loader: "ts",
      sourcefile: `bench-${name}-entry.ts`,
    },
    bundle: true,
    platform: "node",
    format: "esm",
    target: "node20",
    outfile,
    logLevel: "error",
    plugins: [cloudflareWorkersStub],
  });
  return import(pathToFileURL(outfile).href);
}

/**
 * Builds the contenders' limit() functions against one REST endpoint.
 * @param {any} lib the module from loadLibraries
 * @param {{ url: string, token: string, prefix: string }} store
 * @returns {Record<string, LibLimit>}
 */
export function libraryContenders(lib, { url, token, prefix }) {
  const runtime = lib.getRuntime({
    UPSTASH_REDIS_REST_URL: url,
    UPSTASH_REDIS_REST_TOKEN: token,
    LIMITER_CONFIG: JSON.stringify({ rules: [], timeoutMs: 500, failMode: "open", prefix }),
  });
  if (!runtime.ok) throw new Error(`getRuntime: ${runtime.field} ${runtime.detail}`);
  const redis = new lib.Redis({ url, token, enableTelemetry: false });
  /** @type {Map<string, any>} */
  const anchors = new Map();
  /** @param {"slidingWindow" | "fixedWindow"} algorithm */
  const anchor =
    (algorithm) =>
    /** @type {LibLimit} */
    async (key, limit, windowMs, cost = 1) => {
      const id = `${algorithm}:${limit}:${windowMs}`;
      let limiter = anchors.get(id);
      if (!limiter) {
        limiter = new lib.Ratelimit({
          redis,
          limiter: lib.Ratelimit[algorithm](limit, `${windowMs} ms`),
          prefix: `${prefix}-anchor:${id}`,
          ephemeralCache: new Map(),
          timeout: 500,
          analytics: false,
        });
        anchors.set(id, limiter);
      }
      const result = await limiter.limit(key, { rate: cost });
      return {
        allowed: result.success,
        source: result.reason === "cacheBlock" ? "cache" : (result.reason ?? "redis"),
      };
    };
  /** @param {string} algorithm @returns {LibLimit} */
  const ours =
    (algorithm) =>
    async (key, limit, windowMs, cost = 1) => {
      const decision = await runtime.limiter.limit({
        policy: `check.${windowMs}ms`,
        key,
        limit,
        windowMs,
        cost,
        algorithm,
      });
      return { allowed: decision.allowed, source: decision.source };
    };
  /** @type {string[]} */
  const algorithms = lib.ALGORITHMS ?? ["sliding-log"];
  return {
    ...Object.fromEntries(algorithms.map((a) => [oursId(a), ours(a)])),
    anchorSliding: anchor("slidingWindow"),
    anchorFixed: anchor("fixedWindow"),
  };
}

/**
 * The contender id of one of our algorithms: plain `ours` for the default, exact sliding log.
 * @param {string} algorithm
 */
export function oursId(algorithm) {
  return algorithm === "sliding-log" ? "ours" : `ours-${algorithm}`;
}

// ---------------------------------------------------------------------------------------------
// The instant transport: a fetch for INSTANT_URL that, while `recording`, forwards to the real
// bridge and remembers each script's last reply (by SHA); afterwards it answers every script call
// with that reply at once, from memory. The replies are real ones of each contender's current
// script (whatever src/ ships), so only the limiter's and the client's own work is timed.

export const INSTANT_URL = "http://instant.bench.invalid";
/** @type {{ recording: boolean, calls: number, target: string }} */
export const instant = { recording: true, calls: 0, target: "" };
/** @type {Map<string, unknown>} SHA of the client's script text → last reply element */
const replies = new Map();
let installed = false;

/** @param {string} target the bridge's URL (recording forwards there) */
export function installInstantTransport(target) {
  instant.target = target;
  if (installed) return;
  installed = true;
  const realFetch = globalThis.fetch;
  globalThis.fetch = async (input, init) => {
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(INSTANT_URL)) return realFetch(input, init);
    instant.calls++;
    const body = JSON.parse(String(init?.body ?? "null"));
    const pipeline = Array.isArray(body[0]);
    /** @type {unknown[][]} */
    const commands = pipeline ? body : [body];
    const shas = commands.map(shaOf);
    if (!instant.recording && shas.every((sha) => sha && replies.has(sha))) {
      const answers = shas.map((sha) => replies.get(/** @type {string} */ (sha)));
      return new Response(JSON.stringify(pipeline ? answers : answers[0]), {
        status: 200,
        headers: { "content-type": "application/json" },
      });
    }
    const response = await realFetch(instant.target + url.slice(INSTANT_URL.length), init);
    const text = await response.text();
    if (response.ok) {
      const parsed = JSON.parse(text);
      const answers = pipeline ? parsed : [parsed];
      shas.forEach((sha, i) => {
        if (sha && answers[i] && !("error" in answers[i])) replies.set(sha, answers[i]);
      });
    }
    return new Response(text, { status: response.status, headers: response.headers });
  };
}

/** @param {unknown[]} command */
function shaOf(command) {
  const name = String(command[0]).toLowerCase();
  if (name === "evalsha") return String(command[1]);
  if (name === "eval") return createHash("sha1").update(String(command[1])).digest("hex");
  return undefined;
}

/**
 * Isolate CPU per decision (µs, user + system of this process) for `count` sequential decisions.
 * @param {LibLimit} limit
 * @param {{ tag: string, count: number, keyOf: (i: number) => string, limit: number, windowMs: number }} o
 */
export async function cpuPerDecision(limit, { tag, count, keyOf, limit: max, windowMs }) {
  // Warm-up against the real store: records the replies to replay (the last one of each script).
  instant.recording = true;
  for (let i = 0; i < 300; i++) await limit(`${tag}:${keyOf(i)}`, max, windowMs);
  instant.recording = false;
  // Warm-up of the replay path too, so no contender pays for JIT-compiling shared code.
  for (let i = 0; i < 2000; i++) await limit(`${tag}:${keyOf(i)}`, max, windowMs);
  const callsBefore = instant.calls;
  /** @type {Record<string, number>} */
  const sources = {};
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) {
    const decision = await limit(`${tag}:${keyOf(i)}`, max, windowMs);
    sources[decision.source] = (sources[decision.source] ?? 0) + 1;
  }
  const used = process.cpuUsage(before);
  return {
    cpuUsec: (used.user + used.system) / count,
    storeCallsPerDecision: (instant.calls - callsBefore) / count,
    sources,
  };
}

/**
 * Decisions per second in-process with `concurrency` callers for `seconds`.
 * @param {LibLimit} limit
 * @param {{ seconds: number, concurrency: number, body: (n: number) => { key: string, limit: number, windowMs: number } }} o
 */
export async function libraryThroughput(limit, { seconds, concurrency, body }) {
  let n = 0;
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  const cpuBefore = process.cpuUsage();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const b = body(n++);
        try {
          await limit(b.key, b.limit, b.windowMs);
        } catch {
          errors++;
        }
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  const elapsed = (performance.now() - start) / 1000;
  return { decisions: n, perSecond: n / elapsed, errors, cpuUsec: (cpu.user + cpu.system) / n };
}
