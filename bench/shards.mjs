// @ts-check
// Shards (design.md, "Shards: past one database"): one database's ceiling, and shards lifting it.
//
//   node bench/shards.mjs [--quick] [--cap=1000] [--seconds=10] [--repeats=3] [--connections=48]
//   npm run bench -- --only=shards [--quick]            (the same, from bench/run.mjs)
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
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import {
  buildBenchWorker,
  delay,
  ROOT,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
  wranglerBundle,
} from "./lib/infra.mjs";
import { LIMITER_TOKEN } from "./lib/load.mjs";

/** Shard names, in the order the configs list them: "" is the unsuffixed binding. */
export const SHARD_NAMES = ["", "B", "C"];
const KEYS = 100_000;
/** Every key's limit: far above what a run sends it, so every decision is an admission. */
const LIMIT = 1000;
const WINDOW = "1m";
/** Longer than any wait in a full bridge queue, so no decision falls back while measured. */
const TIMEOUT_MS = 10_000;

/**
 * @typedef {object} BridgeCounters
 * @property {number} billedCommands
 * @property {number} requests
 * @property {number} scriptCalls
 * @property {number} countedScriptCalls
 * @property {number} scriptInnerCommands
 * @property {number} waiting
 */

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
 * A bridge's counters (GET /_bridge/stats).
 * @param {{ url: string, token: string }} bridge
 * @returns {Promise<BridgeCounters>}
 */
async function bridgeStats(bridge) {
  const res = await fetch(`${bridge.url}/_bridge/stats`, {
    headers: { authorization: `Bearer ${bridge.token}` },
  });
  if (!res.ok) throw new Error(`${bridge.url}/_bridge/stats answered ${res.status}`);
  return /** @type {BridgeCounters} */ (await res.json());
}

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
 * The shards section: builds the two workers, starts three capped databases, measures.
 * @param {{ quick?: boolean, progress?: (line: string) => void, cap?: number, seconds?: number,
 *   repeats?: number, connections?: number, shardCounts?: number[] }} [options]
 */
export async function runShardsBench({
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

/**
 * The section as markdown.
 * @param {Awaited<ReturnType<typeof runShardsBench>>} results
 */
export function shardsMarkdown(results) {
  const { plan } = results;
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
  for (const c of results.contenders) {
    const measured = c.runs.length > 0;
    const ceiling = measured ? c.ceiling / c.billedPerDecision : Number.NaN;
    lines.push(
      `| ${c.name}${c.status === "measured" ? "" : ` (**${c.status}**)`} | ${c.shards} | ${fixed(c.perSecond)} | ` +
        `${fixed(c.ratioToOneShard, 2)} | ${fixed(c.billedPerDecision, 2)} | ${fixed(c.scriptCallsPerDecision, 2)} | ` +
        `${fixed(ceiling)} | ${c.shareByShard.map((s) => `${fixed(s * 100)} %`).join(" / ") || "–"} | ${c.peakWaiting} |`,
    );
  }
  const notes = results.contenders.filter((c) => c.note);
  if (notes.length > 0) {
    lines.push("");
    for (const c of notes) lines.push(`- **${c.name}**: ${c.note}.`);
  }
  lines.push("");
  return lines.join("\n");
}

/** `node bench/shards.mjs`: the section alone, into bench/shards.md and .json. */
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
  const results = await runShardsBench({
    quick,
    progress,
    ...(cap ? { cap } : {}),
    ...(seconds ? { seconds } : {}),
    ...(repeats ? { repeats } : {}),
    ...(connections ? { connections } : {}),
  });
  const command = ["node bench/shards.mjs", ...argv].join(" ");
  writeShardsOutput(results, command, quick);
}

/**
 * bench/shards.md and bench/shards.json (bench/.quick/ with --quick), headed by the command.
 * @param {Awaited<ReturnType<typeof runShardsBench>>} results
 * @param {string} command what produced them
 * @param {boolean} quick
 */
export function writeShardsOutput(results, command, quick) {
  const out = path.join(ROOT, "bench", quick ? ".quick" : "");
  mkdirSync(out, { recursive: true });
  writeFileSync(
    path.join(out, "shards.json"),
    `${JSON.stringify({ command, ...results }, null, 2)}\n`,
  );
  writeFileSync(
    path.join(out, "shards.md"),
    `# edge-limiter shards benchmark\n\n\`${command}\`, ${results.date}, Node ${results.machine.node}, ` +
      `${results.machine.cpus} cores, ${results.seconds.toFixed(0)} s.\n\n${shardsMarkdown(results)}`,
  );
  console.log(
    `\n${shardsMarkdown(results)}\nwritten: ${path.relative(ROOT, path.join(out, "shards.md"))}`,
  );
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
  process.exit(0);
}
