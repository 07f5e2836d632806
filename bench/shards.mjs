// @ts-check
// Shards (design.md, "Shards: past one database"): one database's ceiling, and shards lifting it.
//
//   node bench/shards.mjs [--quick] [--cap=1000] [--seconds=10] [--repeats=3] [--connections=48]
//   node bench/shards.mjs --faults [--quick] [--connections=8]   (the fault section alone)
//   npm run bench -- --only=shards [--quick]            (both sections, from bench/run.mjs)
//
// The fault section ("Faults: one of three shards hanging", runShardFaultBench below) follows the
// throughput one in every run but `--faults`, which runs it alone and keeps the throughput section
// from the last bench/out/shards.json (bench/out/quick/'s with --quick).
//
// Three private redis-servers (no disk), each behind its own bridge process with the same
// BRIDGE_MAX_COMMANDS_PER_SECOND (default 1000: Upstash pay-as-you-go caps a database at 10 000;
// a tenth keeps this 2-core machine, not the cap, from being the bottleneck). The worker built as
// deployed (wrangler deploy --dry-run) and served by workerd alone, with LIMITER_CONFIG naming 1,
// 2 or 3 shards (`"shards": ["", "B", "C"]`, bindings UPSTASH_REDIS_REST_URL[_<NAME>] / _TOKEN);
// @upstash/ratelimit slidingWindow (bench/anchor-worker.ts, behind the same /check code) on the
// first database. Load: /check over 100 000 distinct keys, each decision an admission (limit
// 1000 a minute), from enough concurrent senders to keep every bridge's queue full; decisions
// per second after a warm-up, billed commands per decision from the bridges' own counters
// (GET /_bridge/stats), contenders rotated, medians reported.
//
// A worker that does not shard yet either refuses `"shards"` (its config is checked strictly:
// 503 on every request) or ignores it (only the first bridge bills any command): both are said
// in the output, and the measure then stands for one database, whatever the config says.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import {
  delay,
  ROOT,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
  wranglerBundle,
} from "../tools/infra.mjs";
import { bridgeStats } from "./lib/bridge-stats.mjs";
import { buildBenchWorker } from "./lib/build-workers.mjs";
import { startHangSwitch } from "./lib/hang-switch.mjs";
import { LIMITER_TOKEN } from "./lib/load.mjs";
import { outDir, publishAlone } from "./lib/output.mjs";

/** Shard names, in the order the configs list them: "" is the unsuffixed binding. */
export const SHARD_NAMES = ["", "B", "C"];
const KEYS = 100_000;
/** Every key's limit: far above what a run sends it, so every decision is an admission. */
const LIMIT = 1000;
const WINDOW = "1m";
/** Longer than any wait in a full bridge queue, so no decision falls back while measured. */
const TIMEOUT_MS = 10_000;

/**
 * @typedef {object} Run
 * @property {number} decisions answered by a store (source "redis") in the measured window
 * @property {number} perSecond those a second
 * @property {Record<string, number>} sources every answer in the window, by source (or status)
 * @property {Record<string, number>} answeredBy answers by the `"shard"` they name (a worker that
 *   shards names it; empty until then)
 * @property {number} errors non-decisions (statuses other than 200 / 429, network errors)
 * @property {number[]} billedByShard commands each database's bridge billed in the window (all
 *   three, whatever the config names)
 * @property {number} billedPerDecision all bridges' billed commands ÷ decisions
 * @property {number} scriptCalls store calls (EVAL/EVALSHA) per decision
 * @property {number} seconds the measured window
 * @property {number} peakWaiting most requests seen waiting at one bridge (saturation)
 */

/**
 * @typedef {object} ContenderResult
 * @property {string} id
 * @property {string} name
 * @property {number} shards databases named in its config
 * @property {"measured" | "refused" | "ignored"} status refused: the worker answered 503 to
 *   its config; ignored: only the first database billed commands
 * @property {string} [note] what the worker said, or which bridges saw nothing
 * @property {Run[]} runs
 * @property {number} perSecond median decisions/s
 * @property {number} billedPerDecision median
 * @property {number} scriptCallsPerDecision median
 * @property {number[]} shareByShard median share of billed commands per database (all three)
 * @property {number} peakWaiting
 */

/** @param {number[]} values */
const median = (values) => {
  const s = [...values].filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

/**
 * The worker's store bindings for the first `count` shards, and its LIMITER_CONFIG: no "shards"
 * for one (one store, as today), `"shards": ["", "B", …]` for more.
 * @param {{ url: string, token: string }[]} bridges
 * @param {number} count
 */
export function shardBindings(bridges, count) {
  /** @type {Record<string, string>} */
  const bindings = {};
  for (const [i, name] of SHARD_NAMES.slice(0, count).entries()) {
    const bridge = /** @type {{ url: string, token: string }} */ (bridges[i]);
    const suffix = name === "" ? "" : `_${name}`;
    bindings[`UPSTASH_REDIS_REST_URL${suffix}`] = bridge.url;
    bindings[`UPSTASH_REDIS_REST_TOKEN${suffix}`] = bridge.token;
  }
  const config = {
    rules: [],
    timeoutMs: TIMEOUT_MS,
    failMode: "open",
    ...(count > 1 ? { shards: SHARD_NAMES.slice(0, count) } : {}),
  };
  return { ...bindings, LIMITER_CONFIG: JSON.stringify(config) };
}

/**
 * One /check.
 * @param {string} url
 * @param {string} key
 * @returns {Promise<{ status: number, source: string, body: any }>}
 */
async function check(url, key) {
  const res = await fetch(`${url}/check`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
    body: JSON.stringify({ key, limit: LIMIT, window: WINDOW }),
  });
  const body = await res.json().catch(() => ({}));
  return { status: res.status, source: typeof body.source === "string" ? body.source : "", body };
}

/**
 * `connections` senders, each sending its next /check when the last is answered, over KEYS keys
 * (a fresh key space per run); counts what came back, from `start()` on.
 * @param {string} url
 * @param {string} tag
 * @param {number} connections
 */
function closedLoad(url, tag, connections) {
  let n = 0;
  let stopped = false;
  let counting = false;
  let decisions = 0;
  let errors = 0;
  /** @type {Record<string, number>} */
  const sources = {};
  /** @type {Record<string, number>} the `"shard"` a sharded worker names in its answers */
  const answeredBy = {};
  const senders = Array.from({ length: connections }, async () => {
    while (!stopped) {
      const key = `${tag}:k${(n++ * 7919) % KEYS}`;
      let outcome;
      try {
        outcome = await check(url, key);
      } catch {
        outcome = { status: 0, source: "network error", body: {} };
      }
      if (!counting) continue;
      const decided = outcome.status === 200 || outcome.status === 429;
      const name = decided ? outcome.source || "?" : `HTTP ${outcome.status}`;
      sources[name] = (sources[name] ?? 0) + 1;
      if (decided && outcome.source === "redis") decisions++;
      if (typeof outcome.body?.shard === "string") {
        answeredBy[outcome.body.shard] = (answeredBy[outcome.body.shard] ?? 0) + 1;
      }
      if (!decided) errors++;
    }
  });
  return {
    /** From now on, answers count. */
    start() {
      counting = true;
    },
    /** What was counted since start(). */
    read: () => ({ decisions, errors, sources: { ...sources }, answeredBy: { ...answeredBy } }),
    async stop() {
      stopped = true;
      await Promise.all(senders);
    },
  };
}

/**
 * The shards sections: the throughput one (below), then, unless `faults: false`, the fault one
 * (runShardFaultBench) under `faults`.
 * @param {Parameters<typeof runThroughputBench>[0] & { faults?: boolean }} [options]
 */
export async function runShardsBench(options = {}) {
  const { faults = true, ...rest } = options;
  const throughput = await runThroughputBench(rest);
  if (!faults) return throughput;
  const { quick, progress } = rest;
  return {
    ...throughput,
    faults: await runShardFaultBench({
      ...(quick !== undefined ? { quick } : {}),
      ...(progress ? { progress } : {}),
    }),
  };
}

/**
 * The throughput section: builds the two workers, starts three capped databases, measures.
 * @param {{ quick?: boolean, progress?: (line: string) => void, cap?: number, seconds?: number,
 *   repeats?: number, connections?: number, shardCounts?: number[] }} [options]
 */
async function runThroughputBench({
  quick = false,
  progress = (line) => console.log(line),
  cap = 1000,
  seconds = quick ? 4 : 10,
  repeats = quick ? 1 : 3,
  connections = 48,
  shardCounts = [1, 2, 3],
} = {}) {
  const warmSeconds = quick ? 2 : 3;
  const tmp = tempDir();
  /** @type {(() => Promise<void>)[]} */
  const cleanups = [];
  const started = Date.now();
  try {
    progress("building the worker and the anchor with wrangler deploy --dry-run");
    const ours = await wranglerBundle(path.join(tmp, "ours"));
    const anchor = await buildBenchWorker(tmp, "anchor", "anchor-worker.ts");

    const databases = Math.max(...shardCounts, 1);
    progress(
      `starting ${databases} private redis-servers, each behind a bridge capped at ${cap}/s`,
    );
    /** @type {{ url: string, token: string, stop: () => Promise<void> }[]} */
    const bridges = [];
    for (let i = 0; i < databases; i++) {
      const redis = await startPrivateRedis();
      cleanups.push(redis.stop);
      const bridge = await startBridgeProcess(redis.url, { maxCommandsPerSecond: cap });
      cleanups.push(bridge.stop);
      bridges.push(bridge);
    }

    /** @type {{ id: string, name: string, shards: number, scriptPath: string, bindings: Record<string, string> }[]} */
    const contenders = [
      ...shardCounts.map((count) => ({
        id: `ours${count}`,
        name: `edge-limiter, ${count} shard${count === 1 ? "" : "s"}`,
        shards: count,
        scriptPath: ours,
        bindings: { LIMITER_TOKEN, ...shardBindings(bridges, count) },
      })),
      {
        id: "anchor",
        name: "@upstash/ratelimit slidingWindow, 1 database",
        shards: 1,
        scriptPath: anchor,
        bindings: {
          LIMITER_TOKEN,
          ...shardBindings(bridges, 1),
          ANCHOR_ALGORITHM: "slidingWindow",
          ANCHOR_TIMEOUT_MS: String(TIMEOUT_MS),
        },
      },
    ];

    /** @type {Map<string, ContenderResult>} */
    const results = new Map(
      contenders.map((c) => [
        c.id,
        {
          id: c.id,
          name: c.name,
          shards: c.shards,
          status: /** @type {ContenderResult["status"]} */ ("measured"),
          runs: [],
          perSecond: Number.NaN,
          billedPerDecision: Number.NaN,
          scriptCallsPerDecision: Number.NaN,
          shareByShard: [],
          peakWaiting: 0,
        },
      ]),
    );

    for (let round = 0; round < repeats; round++) {
      for (const c of contenders) {
        const result = /** @type {ContenderResult} */ (results.get(c.id));
        if (result.status === "refused") continue;
        const worker = await serveWorker({ scriptPath: c.scriptPath, bindings: c.bindings });
        try {
          const probe = await check(worker.url, `probe:${c.id}:${round}`);
          if (probe.status !== 200) {
            result.status = "refused";
            result.note =
              `the worker refused this config, so nothing was measured (a worker that does not shard yet ` +
              `refuses "shards" as an unknown field): it answered ${probe.status} ${JSON.stringify(probe.body).slice(0, 300)}`;
            progress(`${c.id}: ${result.note}`);
            continue;
          }
          const run = await measure(worker.url, `${c.id}:r${round}:${Date.now()}`);
          result.runs.push(run);
          progress(
            `${c.id} round ${round + 1}/${repeats}: ${run.perSecond.toFixed(0)} decisions/s, ` +
              `${run.billedPerDecision.toFixed(2)} billed commands each, by shard ` +
              `[${run.billedByShard.join(", ")}], peak waiting ${run.peakWaiting}`,
          );
        } finally {
          await worker.dispose();
        }
      }
    }

    for (const result of results.values()) {
      if (result.runs.length === 0) continue;
      result.perSecond = median(result.runs.map((r) => r.perSecond));
      result.billedPerDecision = median(result.runs.map((r) => r.billedPerDecision));
      result.scriptCallsPerDecision = median(result.runs.map((r) => r.scriptCalls));
      result.peakWaiting = Math.max(...result.runs.map((r) => r.peakWaiting));
      result.shareByShard = bridges.map((_, i) =>
        median(
          result.runs.map((r) => {
            const total = r.billedByShard.reduce((a, b) => a + b, 0);
            return total > 0 ? (r.billedByShard[i] ?? 0) / total : Number.NaN;
          }),
        ),
      );
      // A worker that ignores "shards" bills only the first database.
      const idle = result.shareByShard
        .map((share, i) => ({ share, name: SHARD_NAMES[i] }))
        .filter((s, i) => i > 0 && i < result.shards && !(s.share > 0));
      if (result.shards > 1 && idle.length > 0) {
        result.status = "ignored";
        result.note = `the worker ignored the extra shards: the bridges of ${idle
          .map((s) => JSON.stringify(s.name))
          .join(", ")} billed no command; this row is one database`;
      }
    }
    const one = results.get("ours1")?.perSecond ?? Number.NaN;
    return {
      date: new Date().toISOString(),
      machine: { node: process.version, cpus: cpus().length },
      plan: {
        cap,
        seconds,
        warmSeconds,
        repeats,
        connections,
        keys: KEYS,
        limit: LIMIT,
        window: WINDOW,
      },
      contenders: [...results.values()].map((r) => ({
        ...r,
        ratioToOneShard: r.perSecond / one,
        ceiling: cap * r.shards,
      })),
      seconds: (Date.now() - started) / 1000,
    };

    /**
     * One run: wait until every bridge is idle, load, let it settle, measure.
     * @param {string} url
     * @param {string} tag
     * @returns {Promise<Run>}
     */
    async function measure(url, tag) {
      for (;;) {
        const stats = await Promise.all(bridges.map(bridgeStats));
        if (stats.every((s) => s.waiting === 0)) break;
        await delay(100);
      }
      await delay(1100); // a quiet second: every run starts with the same burst
      const load = closedLoad(url, tag, connections);
      let peakWaiting = 0;
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const stats = await Promise.all(bridges.map(bridgeStats));
          peakWaiting = Math.max(peakWaiting, ...stats.map((s) => s.waiting));
          await delay(250);
        }
      })();
      await delay(warmSeconds * 1000);
      const before = await Promise.all(bridges.map(bridgeStats));
      const from = performance.now();
      load.start();
      await delay(seconds * 1000);
      // Read as at the start: the bridges first, then the answers (their lag cancels out).
      const after = await Promise.all(bridges.map(bridgeStats));
      const counted = load.read();
      const elapsed = (performance.now() - from) / 1000;
      watching = false;
      await load.stop();
      await watcher;
      const billedByShard = after.map(
        (s, i) => s.billedCommands - (before[i]?.billedCommands ?? 0),
      );
      const scriptCalls = after.reduce(
        (sum, s, i) => sum + s.scriptCalls - (before[i]?.scriptCalls ?? 0),
        0,
      );
      const billed = billedByShard.reduce((a, b) => a + b, 0);
      return {
        decisions: counted.decisions,
        perSecond: counted.decisions / elapsed,
        sources: counted.sources,
        answeredBy: counted.answeredBy,
        errors: counted.errors,
        billedByShard,
        billedPerDecision: billed / counted.decisions,
        scriptCalls: scriptCalls / counted.decisions,
        seconds: elapsed,
        peakWaiting,
      };
    }
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** @param {number} value @param {number} [digits] */
const fixed = (value, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : "–");

// ---------------------------------------------------------------------------------------------
// Faults: one of three shards hanging (`node bench/shards.mjs --faults`).
//
// Three uncapped databases, shard C's bridge behind a hang switch (bench/lib/hang-switch.mjs):
// healthy, then C accepts requests and answers none, then C answers again. The worker as
// deployed, served by workerd alone, one rule (`fault`, limit far above what a run sends a key),
// timeoutMs 500 (the default), fail open through the local fallback (the default). Load: /check
// over FAULT_KEYS distinct keys from a fixed number of concurrent senders, every answer's send
// time, latency, source and shard kept; C's breaker read from GET /check/stats as it goes.

const FAULT_KEYS = 30_000;
/** The worker's default, stated: a decision waits at most this for its shard. */
const FAULT_TIMEOUT_MS = 500;
const FAULT_RULE = "fault";
/** The no-store reference: a rule of limit 1, so that its key, once admitted, is answered from the denial cache. */
const REFERENCE_RULE = "reference";
/** The reference sender's pause between checks (it adds little load). */
const REFERENCE_PAUSE_MS = 20;
const ADMIN_TOKEN = "bench-admin-token";
/** The shard that hangs (its name in SHARD_NAMES). */
const SICK = "C";
/** A C decision this close to the timeout waited for it (the deadline, then the fallback). */
const WAITED_MS = FAULT_TIMEOUT_MS * 0.95;

/**
 * The breaker settings each variant runs with: LIMITER_CONFIG's `breaker` (failureThreshold,
 * cooldownMs, maxCooldownMs). "defaults" are the worker's own (DEFAULT_BREAKER), written out.
 * @type {{ id: string, name: string, breaker: { failureThreshold: number, cooldownMs: number, maxCooldownMs: number } }[]}
 */
/** A shard's breaker doubles its cool-down up to this at most (SHARD_MAX_COOLDOWN_MS in src/limiter/shards/shard.ts). */
const SHARD_MAX_COOLDOWN_MS = 1_500;

export const FAULT_BREAKERS = [
  {
    id: "defaults",
    name: "breaker defaults",
    breaker: { failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 30_000 },
  },
  {
    id: "flat",
    name: "cool-down not doubled",
    breaker: { failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 1_000 },
  },
];

/**
 * @typedef {object} Answer
 * @property {number} sent ms since the load began (performance.now based)
 * @property {number} ms latency
 * @property {string} shard the `"shard"` the answer names ("" the unsuffixed one; "?" none)
 * @property {string} source the answer's `"source"`, or `HTTP <status>` / "network error"
 */

/**
 * @typedef {object} LatencySummary
 * @property {number} count
 * @property {number} p50
 * @property {number} p90
 * @property {number} p99
 * @property {number} max
 * @property {number} redisShare share of these answers with source "redis"
 */

/** @param {number[]} sorted @param {number} q */
const quantile = (sorted, q) =>
  sorted.length === 0
    ? Number.NaN
    : (sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ??
      Number.NaN);

/** @param {Answer[]} answers @returns {LatencySummary} */
function summarize(answers) {
  const sorted = answers.map((a) => a.ms).sort((a, b) => a - b);
  return {
    count: answers.length,
    p50: quantile(sorted, 0.5),
    p90: quantile(sorted, 0.9),
    p99: quantile(sorted, 0.99),
    max: sorted.length > 0 ? (sorted[sorted.length - 1] ?? Number.NaN) : Number.NaN,
    redisShare: answers.filter((a) => a.source === "redis").length / answers.length,
  };
}

/**
 * The worker's bindings for the fault run: the three shards (C through the switch), the rule, the
 * breaker under test.
 * @param {string[]} urls the stores' URLs in SHARD_NAMES order
 * @param {string} token the bridges' token
 * @param {{ failureThreshold: number, cooldownMs: number, maxCooldownMs: number }} breaker
 */
function faultBindings(urls, token, breaker) {
  /** @type {Record<string, string>} */
  const bindings = { LIMITER_TOKEN, LIMITER_ADMIN_TOKEN: ADMIN_TOKEN };
  for (const [i, name] of SHARD_NAMES.entries()) {
    const suffix = name === "" ? "" : `_${name}`;
    bindings[`UPSTASH_REDIS_REST_URL${suffix}`] = /** @type {string} */ (urls[i]);
    bindings[`UPSTASH_REDIS_REST_TOKEN${suffix}`] = token;
  }
  bindings.LIMITER_CONFIG = JSON.stringify({
    // key "ip": a /check key that is not an address is counted as given.
    rules: [
      { name: FAULT_RULE, limit: LIMIT, window: WINDOW },
      { name: REFERENCE_RULE, limit: 1, window: "1h" },
    ],
    timeoutMs: FAULT_TIMEOUT_MS,
    failMode: "open",
    shards: SHARD_NAMES,
    breaker,
  });
  return bindings;
}

/**
 * One /check of the fault rule, timed.
 * @param {string} url
 * @param {string} key
 * @param {number} origin performance.now() the load's times count from
 * @param {string} [rule]
 * @returns {Promise<Answer>}
 */
async function timedCheck(url, key, origin, rule = FAULT_RULE) {
  const sent = performance.now();
  let shard = "?";
  let source;
  try {
    const res = await fetch(`${url}/check`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
      body: JSON.stringify({ key, rule }),
    });
    const body = await res.json().catch(() => ({}));
    if (typeof body.shard === "string") shard = body.shard;
    source =
      (res.status === 200 || res.status === 429) && typeof body.source === "string"
        ? body.source
        : `HTTP ${res.status}`;
  } catch {
    source = "network error";
  }
  return { sent: sent - origin, ms: performance.now() - sent, shard, source };
}

/**
 * C's breaker as GET /check/stats reports it, polled; its changes kept.
 * @param {string} url
 * @param {number} origin
 */
function watchBreaker(url, origin) {
  /** @type {{ at: number, state: string }[]} */
  const changes = [];
  let last = "";
  let watching = true;
  const done = (async () => {
    while (watching) {
      try {
        const res = await fetch(`${url}/check/stats?minutes=1`, {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        });
        const body = await res.json();
        /** @type {{ name: string, breaker: string }[]} */
        const shards = body?.shards?.shards ?? [];
        const state = shards.find((s) => s.name === SICK)?.breaker ?? "?";
        if (state !== last) {
          changes.push({ at: performance.now() - origin, state });
          last = state;
        }
      } catch {
        // The next poll says.
      }
      await delay(20);
    }
  })();
  return {
    changes,
    async stop() {
      watching = false;
      await done;
    },
  };
}

/**
 * The fault section: one of three shards hangs, for each breaker variant.
 * @param {{ quick?: boolean, progress?: (line: string) => void, connections?: number,
 *   keys?: number, variants?: typeof FAULT_BREAKERS }} [options] quick: the defaults only
 */
export async function runShardFaultBench({
  quick = false,
  progress = (line) => console.log(line),
  connections = 8,
  keys = FAULT_KEYS,
  variants = quick ? FAULT_BREAKERS.slice(0, 1) : FAULT_BREAKERS,
} = {}) {
  const phases = { warmSeconds: 2, healthySeconds: 5, hangSeconds: 10, recoveredSeconds: 5 };
  /** However long C takes to come back, the load goes on at most this long after the switch. */
  const recoveryLimitSeconds = 40;
  const tmp = tempDir();
  /** @type {(() => Promise<void>)[]} */
  const cleanups = [];
  const started = Date.now();
  try {
    progress("faults: building the worker with wrangler deploy --dry-run");
    const ours = await wranglerBundle(path.join(tmp, "ours"));
    progress(
      "faults: three private redis-servers, each behind an uncapped bridge; C's behind a hang switch",
    );
    /** @type {{ url: string, token: string }[]} */
    const bridges = [];
    for (let i = 0; i < SHARD_NAMES.length; i++) {
      const redis = await startPrivateRedis();
      cleanups.push(redis.stop);
      const bridge = await startBridgeProcess(redis.url);
      cleanups.push(bridge.stop);
      bridges.push(bridge);
    }
    const sick = SHARD_NAMES.indexOf(SICK);
    const hangSwitch = await startHangSwitch(/** @type {{ url: string }} */ (bridges[sick]).url);
    cleanups.push(hangSwitch.stop);
    const urls = bridges.map((b, i) => (i === sick ? hangSwitch.url : b.url));
    const token = /** @type {{ token: string }} */ (bridges[0]).token;

    const runs = [];
    for (const variant of variants) {
      const worker = await serveWorker({
        scriptPath: ours,
        bindings: faultBindings(urls, token, variant.breaker),
      });
      try {
        const probe = await check(worker.url, `probe:${variant.id}`);
        if (probe.status !== 200) {
          throw new Error(
            `faults: the worker refused the config: ${probe.status} ${JSON.stringify(probe.body).slice(0, 300)}`,
          );
        }
        progress(
          `faults (${variant.name}): ${connections} senders, ${phases.healthySeconds} s healthy, ` +
            `${phases.hangSeconds} s C hanging, then C answering again`,
        );
        const run = await faultRun(worker.url, `${variant.id}:${Date.now()}`);
        runs.push({ ...variant, ...run });
        progress(
          `faults (${variant.name}): redis share during the hang ${fixed(run.figures.redisShareDuringHang * 100, 1)} %, ` +
            `C after its breaker opened p50 ${fixed(run.figures.sickAfterOpen.p50, 2)} ms, ` +
            `C redis again ${fixed(run.figures.recovery.firstRedisMs)} ms / steady ${fixed(run.figures.recovery.steadyRedisMs)} ms ` +
            `after the switch back, healthy shards' max during the hang ${fixed(run.figures.healthyDuringHang.max, 1)} ms`,
        );
      } finally {
        await worker.dispose();
      }
    }
    return {
      date: new Date().toISOString(),
      machine: { node: process.version, cpus: cpus().length },
      plan: {
        connections,
        keys,
        ...phases,
        recoveryLimitSeconds,
        timeoutMs: FAULT_TIMEOUT_MS,
        limit: LIMIT,
        window: WINDOW,
        sick: SICK,
        waitedMs: WAITED_MS,
      },
      runs,
      seconds: (Date.now() - started) / 1000,
    };

    /**
     * One variant: warm, healthy, hang, answer again; then the figures.
     * @param {string} url
     * @param {string} tag
     */
    async function faultRun(url, tag) {
      const origin = performance.now();
      const clock = () => performance.now() - origin;
      /** @type {Answer[]} */
      const answers = [];
      let n = 0;
      let stopped = false;
      // Online, for the end of the recovered phase: C's last non-redis answer after the switch back.
      let unhangAt = Number.POSITIVE_INFINITY;
      let lastSickBad = Number.NEGATIVE_INFINITY;
      let sickRedisAfterBad = false;
      const breaker = watchBreaker(url, origin);
      const senders = Array.from({ length: connections }, async () => {
        while (!stopped) {
          const answer = await timedCheck(url, `${tag}:k${(n++ * 7919) % keys}`, origin);
          answers.push(answer);
          if (answer.shard === SICK && answer.sent + answer.ms >= unhangAt) {
            if (answer.source === "redis") sickRedisAfterBad = true;
            else {
              lastSickBad = answer.sent + answer.ms;
              sickRedisAfterBad = false;
            }
          }
        }
      });
      // The no-store reference: one key of the limit-1 rule, denied from the cache once admitted.
      /** @type {Answer[]} */
      const references = [];
      const reference = (async () => {
        while (!stopped) {
          references.push(await timedCheck(url, `${tag}:reference`, origin, REFERENCE_RULE));
          await delay(REFERENCE_PAUSE_MS);
        }
      })();
      await delay(phases.warmSeconds * 1000);
      const healthyAt = clock();
      await delay(phases.healthySeconds * 1000);
      const hangAt = clock();
      await hangSwitch.hang();
      await delay(phases.hangSeconds * 1000);
      const backAt = clock();
      unhangAt = backAt;
      const held = await hangSwitch.forward();
      const minEnd = backAt + phases.recoveredSeconds * 1000;
      const maxEnd = backAt + recoveryLimitSeconds * 1000;
      // The recovered phase: its 5 s, and on until C has answered from redis only for a second.
      for (;;) {
        const t = clock();
        if (t >= maxEnd) break;
        if (t >= minEnd && sickRedisAfterBad && t - Math.max(lastSickBad, backAt) >= 1000) break;
        await delay(50);
      }
      const endAt = clock();
      stopped = true;
      await Promise.all([...senders, reference]);
      await breaker.stop();
      return {
        marks: { healthyAt, hangAt, backAt, endAt },
        breakerChanges: breaker.changes,
        hangSwitch: held,
        figures: faultFigures(answers, { healthyAt, hangAt, backAt, endAt }, breaker.changes),
        reference: {
          healthy: summarize(
            references.filter(
              (a) => a.source === "cache" && a.sent >= healthyAt && a.sent < hangAt,
            ),
          ),
          hang: summarize(
            references.filter((a) => a.source === "cache" && a.sent >= hangAt && a.sent < backAt),
          ),
        },
      };
    }

    /**
     * What the answers say.
     * @param {Answer[]} answers
     * @param {{ healthyAt: number, hangAt: number, backAt: number, endAt: number }} marks
     * @param {{ at: number, state: string }[]} changes C's breaker as /check/stats reported it
     */
    function faultFigures(answers, { healthyAt, hangAt, backAt }, changes) {
      const arrived = (/** @type {Answer} */ a) => a.sent + a.ms;
      const sickOf = (/** @type {Answer} */ a) => a.shard === SICK;
      const healthyOf = (/** @type {Answer} */ a) => a.shard !== SICK && a.shard !== "?";
      const sentIn = (/** @type {number} */ from, /** @type {number} */ to) =>
        answers.filter((a) => a.sent >= from && a.sent < to);
      const recoveredTo = backAt + phases.recoveredSeconds * 1000;
      const healthyPhase = sentIn(healthyAt, hangAt);
      const hangPhase = sentIn(hangAt, backAt);
      const recoveredPhase = sentIn(backAt, recoveredTo);
      // C's breaker open, from the answers: the arrival of C's first answer after the hang began
      // that redis did not give and that did not wait for the timeout (the first decision the
      // breaker sent straight to the fallback).
      const firstSkip = answers
        .filter(
          (a) => sickOf(a) && arrived(a) >= hangAt && a.source !== "redis" && a.ms < WAITED_MS,
        )
        .reduce((min, a) => Math.min(min, arrived(a)), Number.POSITIVE_INFINITY);
      const firstBad = answers
        .filter((a) => sickOf(a) && arrived(a) >= hangAt && a.source !== "redis")
        .reduce((min, a) => Math.min(min, arrived(a)), Number.POSITIVE_INFINITY);
      const openedByStats = changes.find((c) => c.at >= hangAt && c.state === "open")?.at;
      const closedByStats = changes.find((c) => c.at >= backAt && c.state === "closed")?.at;
      // C's decisions that waited the deadline: before the breaker opened (the first ones, and
      // those in flight at the switch), and after (the breaker's probes).
      const sickWaiting = answers.filter(
        (a) => sickOf(a) && arrived(a) >= hangAt && a.sent < backAt && a.ms >= WAITED_MS,
      );
      const waitedBeforeOpen = sickWaiting.filter((a) => a.sent < firstSkip);
      const sickAfterOpen = hangPhase.filter((a) => sickOf(a) && a.sent >= firstSkip);
      // C's answers after the switch back, in the order they arrived.
      const sickBack = answers
        .filter((a) => sickOf(a) && arrived(a) >= backAt)
        .sort((a, b) => arrived(a) - arrived(b));
      const firstRedis = sickBack.find((a) => a.source === "redis");
      let lastBadIndex = -1;
      sickBack.forEach((a, i) => {
        if (a.source !== "redis") lastBadIndex = i;
      });
      const steady = sickBack.slice(lastBadIndex + 1).find((a) => a.source === "redis");
      /** @param {Answer[]} list */
      const bySource = (list) => {
        /** @type {Record<string, number>} */
        const counts = {};
        for (const a of list) counts[a.source] = (counts[a.source] ?? 0) + 1;
        return counts;
      };
      return {
        redisShareDuringHang:
          hangPhase.filter((a) => a.source === "redis").length / hangPhase.length,
        sourcesDuringHang: bySource(hangPhase),
        sickShareDuringHang: hangPhase.filter(sickOf).length / hangPhase.length,
        perSecond: {
          healthy: healthyPhase.length / phases.healthySeconds,
          hang: hangPhase.length / phases.hangSeconds,
          recovered: recoveredPhase.length / phases.recoveredSeconds,
        },
        firstFallbackMs: firstBad - hangAt,
        breakerOpenedMs: firstSkip - hangAt,
        breakerOpenedByStatsMs: openedByStats === undefined ? Number.NaN : openedByStats - hangAt,
        sickAfterOpen: summarize(sickAfterOpen),
        sickAfterOpenSources: bySource(sickAfterOpen),
        waitedBeforeOpen: waitedBeforeOpen.length,
        waitedProbes: sickWaiting.length - waitedBeforeOpen.length,
        recovery: {
          firstRedisMs: firstRedis ? arrived(firstRedis) - backAt : Number.NaN,
          steadyRedisMs: steady ? arrived(steady) - backAt : Number.NaN,
          closedByStatsMs: closedByStats === undefined ? Number.NaN : closedByStats - backAt,
          sickAnswersBeforeSteady: lastBadIndex + 1,
        },
        healthyBefore: summarize(healthyPhase.filter(healthyOf)),
        healthyDuringHang: summarize(hangPhase.filter(healthyOf)),
        healthyRecovered: summarize(recoveredPhase.filter(healthyOf)),
        sickBefore: summarize(healthyPhase.filter(sickOf)),
        sickDuringHang: summarize(hangPhase.filter(sickOf)),
        unnamed: answers.filter((a) => a.shard === "?").length,
      };
    }
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  }
}

/** @param {boolean} met */
const verdict = (met) => (met ? "met" : "**not met**");

/**
 * The fault section as markdown.
 * @param {Awaited<ReturnType<typeof runShardFaultBench>> & { command?: string }} faults
 */
export function faultsMarkdown(faults) {
  const { plan, runs } = faults;
  const ms = (/** @type {number} */ v, digits = 1) => `${fixed(v, digits)} ms`;
  const settings = (/** @type {(typeof runs)[number]} */ r) =>
    `failureThreshold ${r.breaker.failureThreshold}, cooldownMs ${r.breaker.cooldownMs}, maxCooldownMs ${r.breaker.maxCooldownMs}; ` +
    `a shard's doubling stops at ${Math.min(Math.max(r.breaker.cooldownMs, r.breaker.maxCooldownMs), SHARD_MAX_COOLDOWN_MS)} ms`;
  const lines = [
    "## Faults: one of three shards hanging",
    "",
    ...(faults.command
      ? [
          `\`${faults.command}\`, ${faults.date}, Node ${faults.machine.node}, ${faults.machine.cpus} cores, ${fixed(faults.seconds)} s.`,
          "",
        ]
      : []),
    `Three shards (\`"shards": ["", "B", "C"]\`), each a private redis-server behind its own uncapped bridge; ` +
      `shard ${plan.sick}'s bridge reached through a hang switch (bench/lib/hang-switch.mjs, its own process): it relays ` +
      "requests; switched to hang it still accepts connections and reads requests but answers none, and holds the answers of " +
      "requests already in flight; switched back it relays new requests at once and releases what it held (dropped where " +
      "the worker has given up). The worker as deployed (wrangler deploy --dry-run), served by workerd alone (one isolate), " +
      `one rule (\`${FAULT_RULE}\`: limit ${plan.limit} per ${plan.window}, far above what a run sends a key, so every decision ` +
      `is an admission), \`timeoutMs\` ${plan.timeoutMs} (the default), fail open through the local fallback (the default). ` +
      `Load: /check \`{"key", "rule"}\` over ${plan.keys.toLocaleString("en")} distinct keys (about a third on ${plan.sick}: the answers' ` +
      `\`"shard"\` says which) from ${plan.connections} concurrent senders, each sending its next check when the last is answered; ` +
      `${plan.warmSeconds} s of warm-up (not counted), ${plan.healthySeconds} s healthy, ${plan.hangSeconds} s with ${plan.sick} hanging, ` +
      `then ${plan.sick} answering again: ${plan.recoveredSeconds} s, longer if ${plan.sick} is not yet back on redis (until it has been ` +
      `for a second, at most ${plan.recoveryLimitSeconds} s). A check counts in the phase it was sent in. ${plan.sick}'s breaker is also read ` +
      "from GET /check/stats (`shards`) every 20 ms. One run per breaker setting, in this order, on the same databases.",
    "",
    `| figure | floor | ${runs.map((r) => `${r.name} (${settings(r)})`).join(" | ")} |`,
    `| --- | --- | ${runs.map(() => "---").join(" | ")} |`,
  ];
  /** @param {string} figure @param {string} floor @param {(r: (typeof runs)[number]) => string} cell */
  const row = (figure, floor, cell) =>
    lines.push(`| ${figure} | ${floor} | ${runs.map(cell).join(" | ")} |`);
  row(
    "decisions by redis during the hang, all shards' keys",
    "≥ 60 %",
    (r) =>
      `${fixed(r.figures.redisShareDuringHang * 100, 1)} % (${plan.sick}'s keys: ${fixed(r.figures.sickShareDuringHang * 100, 1)} % of the checks): ${verdict(r.figures.redisShareDuringHang >= 0.6)}`,
  );
  row(
    `${plan.sick}'s keys once its breaker opened: p50 / p90 (p99, max)`,
    "p50 ≤ 5 ms",
    (r) =>
      `${ms(r.figures.sickAfterOpen.p50, 2)} / ${ms(r.figures.sickAfterOpen.p90, 2)} (${ms(r.figures.sickAfterOpen.p99)}, ${ms(r.figures.sickAfterOpen.max)}; ${r.figures.sickAfterOpen.count} checks): ${verdict(r.figures.sickAfterOpen.p50 <= 5)}`,
  );
  row(
    `${plan.sick} decided by redis again, after the switch back: first answer / steady run`,
    "≤ 2 s",
    (r) =>
      `${ms(r.figures.recovery.firstRedisMs, 0)} / ${ms(r.figures.recovery.steadyRedisMs, 0)}: ${verdict(r.figures.recovery.steadyRedisMs <= 2000)}`,
  );
  row(
    `no-store reference (a denied key answered from the denial cache), healthy / ${plan.sick} hanging: p50 / p90`,
    "–",
    (r) =>
      `${ms(r.reference.healthy.p50, 2)} / ${ms(r.reference.healthy.p90, 2)}; ${ms(r.reference.hang.p50, 2)} / ${ms(r.reference.hang.p90, 2)}`,
  );
  row(
    "healthy shards' keys, healthy phase: p50 / p99 / max",
    "–",
    (r) =>
      `${ms(r.figures.healthyBefore.p50, 2)} / ${ms(r.figures.healthyBefore.p99)} / ${ms(r.figures.healthyBefore.max)}`,
  );
  row(
    `healthy shards' keys, ${plan.sick} hanging: p50 / p99 / max`,
    `max well under ${plan.timeoutMs} ms`,
    (r) =>
      `${ms(r.figures.healthyDuringHang.p50, 2)} / ${ms(r.figures.healthyDuringHang.p99)} / **${ms(r.figures.healthyDuringHang.max)}** ` +
      `(redis ${fixed(r.figures.healthyDuringHang.redisShare * 100, 1)} %)`,
  );
  row(
    `healthy shards' keys, ${plan.sick} answering again (first ${plan.recoveredSeconds} s): p50 / p99 / max`,
    "–",
    (r) =>
      `${ms(r.figures.healthyRecovered.p50, 2)} / ${ms(r.figures.healthyRecovered.p99)} / ${ms(r.figures.healthyRecovered.max)}`,
  );
  row(
    `${plan.sick}'s decisions that waited the full timeout before its breaker opened`,
    "expected",
    (r) => `${r.figures.waitedBeforeOpen}`,
  );
  row(
    `${plan.sick}'s decisions that waited it after (the breaker's probes)`,
    "expected",
    (r) => `${r.figures.waitedProbes}`,
  );
  row(
    `${plan.sick}'s first fallback answer / breaker open (first answer that skipped the store; /check/stats), after the hang began`,
    "–",
    (r) =>
      `${ms(r.figures.firstFallbackMs, 0)} / ${ms(r.figures.breakerOpenedMs, 0)}; ${ms(r.figures.breakerOpenedByStatsMs, 0)}`,
  );
  row(`${plan.sick}'s breaker closed again (/check/stats), after the switch back`, "–", (r) =>
    ms(r.figures.recovery.closedByStatsMs, 0),
  );
  row(`${plan.sick}'s breaker (/check/stats), s after the hang began`, "–", (r) => {
    const timeline = r.breakerChanges
      .filter((c) => c.at >= r.marks.hangAt)
      .map((c) => `${c.state} ${fixed((c.at - r.marks.hangAt) / 1000, 2)}`)
      .join(", ");
    return `${timeline} (switched back at ${fixed((r.marks.backAt - r.marks.hangAt) / 1000, 2)})`;
  });
  row("checks answered a second: healthy / hang / answering again", "–", (r) =>
    [r.figures.perSecond.healthy, r.figures.perSecond.hang, r.figures.perSecond.recovered]
      .map((v) => fixed(v))
      .join(" / "),
  );
  row(
    "the hang switch: requests / held before relaying / answers held / dropped",
    "–",
    (r) =>
      `${r.hangSwitch.requests} / ${r.hangSwitch.heldRequests} / ${r.hangSwitch.heldAnswers} / ${r.hangSwitch.dropped}`,
  );
  lines.push(
    "",
    "What each figure is:",
    "",
    `- **decisions by redis during the hang**: of every check sent while ${plan.sick} hung, the share answered \`"source": "redis"\` ` +
      `(the healthy shards' keys are decided by their stores as before; ${plan.sick}'s go to the fallback).`,
    `- **${plan.sick}'s keys once its breaker opened**: the latency seen by the sender (request to answer, through workerd) of ` +
      `${plan.sick}'s keys sent after the breaker opened, until the switch back. "Opened": the arrival of the first answer for a ` +
      `${plan.sick} key that redis did not give and that did not wait the timeout (the first the breaker sent straight to the ` +
      "fallback; /check/stats agrees within its polling). " +
      "The breaker's probes are among them (each waits the timeout), hence p90 as well as p50.",
    `- **decided by redis again**: from the switch back (the moment the switch was told) to the arrival of the first \`"source": "redis"\` ` +
      `answer for a ${plan.sick} key, and to the first of the run of redis answers that ${plan.sick}'s keys get from then on ` +
      "(the answer after the last non-redis one). The floor is read on the steady run.",
    `- **no-store reference**: beside the load, one more sender checks one key of a second rule (\`${REFERENCE_RULE}\`, limit 1 ` +
      `per hour) every ${REFERENCE_PAUSE_MS} ms; once admitted, the key is answered from the isolate's denial cache with no store ` +
      "call: the latency of an answer that waits on no store, under the same load on the same machine (what the path itself " +
      "costs here: HTTP, workerd, the load generator).",
    `- **healthy shards' keys**: latency of the checks whose answer names shard "" or "B", in each phase; with ${plan.sick} hanging ` +
      `their max stays far from the ${plan.timeoutMs} ms timeout if no decision of theirs waits on ${plan.sick}.`,
    `- **waited the full timeout**: ${plan.sick}'s checks that took ≥ ${plan.waitedMs} ms: those sent before the breaker opened ` +
      "(in flight at the switch or sent since: expected; with a closed loop every sender soon waits on one), and those sent " +
      "after it (one probe per cool-down).",
    `- **breaker**: ${plan.sick}'s breaker state in the isolate as /check/stats reports it, polled (so ± 20 ms).`,
    "",
  );
  for (const r of runs.filter((r) => !(r.figures.sickAfterOpen.p50 <= 5))) {
    lines.push(
      `${r.name}: ${plan.sick}'s keys once its breaker opened answered in ${ms(r.figures.sickAfterOpen.p50, 2)} at the median, ` +
        `over the 5 ms floor, against ${ms(r.reference.hang.p50, 2)} for the no-store reference in the same phase: ` +
        `${r.figures.sickAfterOpen.p50 <= r.reference.hang.p50 * 1.25 ? "at most a quarter above what an answer that waits on no store costs on this machine under this load, so what misses the floor is the path (HTTP, workerd, the load generator, the machine's other work), not a wait on the sick shard" : "more than an answer that waits on no store: a wait that this run does not explain"}.`,
      "",
    );
  }
  const slow = runs.filter((r) => !(r.figures.recovery.steadyRedisMs <= 2000));
  for (const r of slow) {
    const since = (/** @type {number} */ at) => `${fixed((at - r.marks.hangAt) / 1000, 1)} s`;
    const reopened = r.breakerChanges
      .filter((c) => c.at > r.marks.hangAt && c.state === "open")
      .slice(1)
      .map((c) => since(c.at));
    const probeAfter = r.breakerChanges.find((c) => c.at >= r.marks.backAt && c.state !== "open");
    lines.push(
      `Why ${r.name} misses the recovery floor: an open breaker lets one probe through per cool-down, and each failed probe ` +
        `doubles the cool-down (cooldownMs ${r.breaker.cooldownMs}, up to maxCooldownMs ${r.breaker.maxCooldownMs}). ` +
        `Here the probes failed at ${reopened.join(", ") || "–"} after the hang began, so the next one was due only at ` +
        `${probeAfter ? since(probeAfter.at) : "–"}, though ${plan.sick} answered again from ${since(r.marks.backAt)}: until then ` +
        `nothing asks ${plan.sick}, and its keys stay on the fallback. The wait after a store comes back is the cool-down then ` +
        "running, which grows with the outage (about as long as the outage has lasted, up to maxCooldownMs).",
      "",
    );
  }
  return lines.join("\n");
}

/**
 * @typedef {Awaited<ReturnType<typeof runShardFaultBench>> & { command?: string }} FaultResults
 * @typedef {Partial<Awaited<ReturnType<typeof runThroughputBench>>> & { command?: string,
 *   faults?: FaultResults }} ShardsResults either section or both (what shards.json holds)
 */

/**
 * The sections as markdown: the throughput one, the fault one, whichever `results` holds.
 * @param {ShardsResults} results
 */
export function shardsMarkdown(results) {
  return [
    ...(results.plan && results.contenders ? [throughputMarkdown(results)] : []),
    ...(results.faults ? [faultsMarkdown(results.faults)] : []),
  ].join("\n");
}

/**
 * The throughput section as markdown.
 * @param {ShardsResults} results
 */
function throughputMarkdown(results) {
  const plan = /** @type {NonNullable<ShardsResults["plan"]>} */ (results.plan);
  const contenders = /** @type {NonNullable<ShardsResults["contenders"]>} */ (results.contenders);
  const lines = [
    "## Shards: past one database",
    "",
    `${plan.keys.toLocaleString("en")} distinct keys, each decision an admission (limit ${plan.limit} per ${plan.window}), ` +
      `through /check of the worker as deployed (workerd alone), ${plan.connections} concurrent senders. ` +
      `Each database a private redis-server behind its own bridge capped at **${plan.cap} billed commands/s** ` +
      "(BRIDGE_MAX_COMMANDS_PER_SECOND; Upstash pay-as-you-go caps a database at 10 000). " +
      `Decisions/s over ${plan.seconds} s after ${plan.warmSeconds} s of the same load, median of ${plan.repeats} ` +
      `rotation${plan.repeats === 1 ? "" : "s"}; billed commands from the bridges' own counters (every command, scripts' inner ones counted exactly). ` +
      "Ceiling: the decisions/s the databases' caps allow at that bill.",
    "",
    "| contender | databases | decisions/s | × one shard | billed commands / decision | store calls / decision | ceiling (cap × databases ÷ bill) | share of commands by database | peak requests waiting |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const c of contenders) {
    const measured = c.runs.length > 0;
    const ceiling = measured ? c.ceiling / c.billedPerDecision : Number.NaN;
    lines.push(
      `| ${c.name}${c.status === "measured" ? "" : ` (**${c.status}**)`} | ${c.shards} | ${fixed(c.perSecond)} | ` +
        `${fixed(c.ratioToOneShard, 2)} | ${fixed(c.billedPerDecision, 2)} | ${fixed(c.scriptCallsPerDecision, 2)} | ` +
        `${fixed(ceiling)} | ${c.shareByShard.map((s) => `${fixed(s * 100)} %`).join(" / ") || "–"} | ${c.peakWaiting} |`,
    );
  }
  const notes = contenders.filter((c) => c.note);
  if (notes.length > 0) {
    lines.push("");
    for (const c of notes) lines.push(`- **${c.name}**: ${c.note}.`);
  }
  lines.push("");
  return lines.join("\n");
}

/**
 * `node bench/shards.mjs`: both sections, into bench/out/shards.md and .json and the shards block
 * of bench/results.md; `--faults`: the fault section alone (the throughput section kept from the
 * last bench/out/shards.json).
 */
async function main() {
  const argv = process.argv.slice(2);
  /** @param {string} name */
  const numberArg = (name) => {
    const raw = argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 1) {
      throw new Error(`--${name} takes a whole number ≥ 1, got ${JSON.stringify(raw)}`);
    }
    return value;
  };
  const quick = argv.includes("--quick");
  const started = Date.now();
  /** @param {string} line */
  const progress = (line) =>
    console.log(`[shards ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const cap = numberArg("cap");
  const seconds = numberArg("seconds");
  const repeats = numberArg("repeats");
  const connections = numberArg("connections");
  const command = ["node bench/shards.mjs", ...argv].join(" ");
  if (argv.includes("--faults")) {
    const faults = await runShardFaultBench({
      quick,
      progress,
      ...(connections ? { connections } : {}),
    });
    writeShardsOutput({ ...previousResults(quick), faults }, command, quick);
    return;
  }
  const results = await runShardsBench({
    quick,
    progress,
    ...(cap ? { cap } : {}),
    ...(seconds ? { seconds } : {}),
    ...(repeats ? { repeats } : {}),
    ...(connections ? { connections } : {}),
  });
  writeShardsOutput(results, command, quick);
}

/**
 * What the last run wrote (bench/out/shards.json, or bench/out/quick/'s), but its fault section.
 * @param {boolean} quick
 * @returns {ShardsResults}
 */
function previousResults(quick) {
  const file = path.join(outDir(quick), "shards.json");
  if (!existsSync(file)) return {};
  try {
    const { faults: _faults, ...previous } = JSON.parse(readFileSync(file, "utf8"));
    return previous;
  } catch {
    return {};
  }
}

/**
 * bench/out/shards.md and .json (bench/out/quick/ with --quick), each section headed by the
 * command that produced it (`command` for a section that names none yet).
 * @param {ShardsResults} results
 * @param {string} command what produced them
 * @param {boolean} quick
 */
export function writeShardsOutput(results, command, quick) {
  const out = outDir(quick);
  mkdirSync(out, { recursive: true });
  /** @type {ShardsResults} */
  const named = {
    ...(results.plan ? { command: results.command ?? command } : {}),
    ...results,
    ...(results.faults ? { faults: { command, ...results.faults } } : {}),
  };
  const json = path.join(out, "shards.json");
  writeFileSync(json, `${JSON.stringify(named, null, 2)}\n`);
  const head =
    named.plan && named.machine
      ? `\`${named.command}\`, ${named.date}, Node ${named.machine.node}, ` +
        `${named.machine.cpus} cores, ${fixed(named.seconds ?? Number.NaN)} s.\n\n`
      : "";
  writeFileSync(
    path.join(out, "shards.md"),
    `# edge-limiter shards benchmark\n\n${head}${shardsMarkdown(named)}`,
  );
  console.log(
    `\n${shardsMarkdown(named)}\nwritten: ${path.relative(ROOT, path.join(out, "shards.md"))}`,
  );
  console.log(`written: ${publishAlone(quick, "shards")}`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
  process.exit(0);
}
