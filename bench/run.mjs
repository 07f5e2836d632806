// @ts-check
// `npm run bench [-- --quick] [-- --only=<section>]`: edge-limiter against @upstash/ratelimit,
// same runtime (workerd alone, as deployed), same private Redis, same REST bridge, one run,
// alternating, repeated; medians and ratios into bench/results.md (+ SVG charts), the one committed
// report. Raw JSON and per-section Markdown go to bench/out/ (git-ignored; bench/lib/output.mjs).
// --quick (CI) writes everything, its report too, to bench/out/quick/, never over the committed
// run. --only=<section> runs one section alone, into bench/out/<section>.md and .json:
//   cpu           the workerd-CPU side by side (to iterate on CPU; --cpu-rotations=N)
//   billed        Upstash commands and dollars per decision by traffic shape ≈ 3 min, 2 quick
//   regions       three databases, delay proxies, ours beside MultiRegionRatelimit ≈ 5 min, 2 quick
//   plans         overrides and blocks beside the anchor's, library level ≈ 1.5 min, 40 s quick
//   regions-slow  the us store 400 ms away, ours with and without regions ≈ 1.5 min, 40 s quick
//   limit-change  a full ring of 100 000 whose limit alternates (--baseline=<git ref> beside)
//   shards        three capped databases, 1–3 shards and the anchor (bench/shards.mjs) ≈ 4 min
//   concurrency   two workers on one store, a slow origin (bench/concurrency.mjs) ≈ 2 min
//   usage         usage rules through two workers, an SSE origin (bench/usage.mjs) ≈ 5 min
// The full run measures the first four with the rest; the last five run only alone, and each
// replaces its own block of bench/results.md (the full run keeps those blocks as they are).
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  buildBaseline,
  delay,
  ROOT,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
} from "../tools/infra.mjs";
import { startOrigin } from "../tools/origin-server.mjs";
import { refusingStoreUrl, startCountingProxy, startHangingStore } from "../tools/store-front.mjs";
import { runConcurrencyBench, writeConcurrencyOutput } from "./concurrency.mjs";
import { analyse, edgeBursts, rollingAdmissions, steadySender } from "./lib/accuracy.mjs";
import { billedMarkdown, billedTable, runBilledCommands } from "./lib/billed-commands.mjs";
import { buildWorkers } from "./lib/build-workers.mjs";
import { cpuByPart, profileWorkerd } from "./lib/cpu-profile.mjs";
import { measureWorkerdCpu } from "./lib/cpu-section.mjs";
import { leaseMarkdown, runLeaseBench } from "./lib/lease-bench.mjs";
import {
  cpuPerDecision,
  INSTANT_URL,
  installInstantTransport,
  libraryContenders,
  libraryThroughput,
  loadLibraries,
  oursId,
} from "./lib/library.mjs";
import { limitChangeMarkdown, runLimitChange } from "./lib/limit-change.mjs";
import {
  bodyExtras,
  check,
  LIMITER_TOKEN,
  LOADS,
  PROXY_RULES,
  runLoad,
  runProxyLoad,
} from "./lib/load.mjs";
import { logLayoutsMarkdown, runLogLayouts } from "./lib/log-layouts.mjs";
import { ALONE_SECTIONS, outDir, publishAlone, publishMain } from "./lib/output.mjs";
import { plansMarkdown, plansTable, runPlansBench } from "./lib/plans-bench.mjs";
import { connectStats } from "./lib/redis-stats.mjs";
import {
  regionsMarkdown,
  runRegionsBench,
  runSlowRegionBench,
  slowRegionMarkdown,
} from "./lib/regions-bench.mjs";
import { writeReport } from "./lib/report.mjs";
import { runUsageBench } from "./lib/usage-bench.mjs";
import { runShardsBench, writeShardsOutput } from "./shards.mjs";
import { writeUsageOutput } from "./usage.mjs";

const quick = process.argv.includes("--quick");
const cpuOnly = process.argv.includes("--only=cpu");
const billedOnly = process.argv.includes("--only=billed");
const regionsOnly = process.argv.includes("--only=regions");
const slowRegionOnly = process.argv.includes("--only=regions-slow");
const plansOnly = process.argv.includes("--only=plans");
const limitChangeOnly = process.argv.includes("--only=limit-change");
const shardsOnly = process.argv.includes("--only=shards");
const concurrencyOnly = process.argv.includes("--only=concurrency");
const usageOnly = process.argv.includes("--only=usage");
/**
 * Knobs of the two modes: full ≈ 24 min, quick ≈ 7 min on a 2-core machine (the billed-commands
 * section ≈ 3 and 2 min of that).
 */
const PLAN = quick
  ? {
      repeats: 1,
      seconds: 2,
      connections: 32,
      outageSeconds: 1.5,
      steadySeconds: 4,
      edges: 1,
      cpuRepeats: 1,
      cpuSeconds: 2,
      cpuRotations: 2,
      cpuSlice: 1,
      cpuRate: 400,
    }
  : {
      repeats: 3,
      seconds: 6,
      connections: 32,
      outageSeconds: 4,
      steadySeconds: 12,
      edges: 3,
      cpuRepeats: 8,
      cpuSeconds: 3,
      cpuRotations: 12,
      cpuSlice: 2,
      cpuRate: 400,
    };
// Up to 8 000: the retired sorted set's cap, kept so figures compare with earlier runs.
const MEMORY_LIMITS = [10, 100, 1000, 8000];
const started = Date.now();
// --cpu-rotations=N overrides the CPU section's rotations (iterating on CPU with --only=cpu).
const cpuRotationsArg = process.argv.find((a) => a.startsWith("--cpu-rotations="));
// --baseline=<git ref>: worker/worker.ts at that ref joins the CPU section (before/after in one run).
const baselineRef = process.argv.find((a) => a.startsWith("--baseline="))?.slice(11);
if (cpuRotationsArg) PLAN.cpuRotations = Number(cpuRotationsArg.slice(16));
// Raw output (git-ignored, bench/lib/output.mjs); a quick run never touches bench/results.md.
const OUTPUT = outDir(quick);

/** @param {string} message */
function progress(message) {
  const s = ((Date.now() - started) / 1000).toFixed(0).padStart(4);
  console.log(`[bench ${s}s] ${message}`);
}

/** @param {number[]} values */
const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? (s[m] ?? Number.NaN) : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
};

/**
 * The contenders behind /check: worker/worker.ts as deployed, once per algorithm it offers (found in
 * src/store/algorithm.ts when it runs, so new ones join without editing this file; `ours` is the
 * default sliding log), and bench/anchor-worker.ts with each of the anchor's algorithms.
 * @typedef {{ id: string, name: string, bundle: "ours" | "anchor", bindings: Record<string, string>, extra?: object }} Contender
 */
const OURS_CONFIG = JSON.stringify({ rules: [], timeoutMs: 500, failMode: "open" });
// The same on the caller's clock (src/config/limiter-config.ts `clock`): no TIME in the scripts.
const OURS_CALLER_CLOCK_CONFIG = JSON.stringify({
  rules: [],
  timeoutMs: 500,
  failMode: "open",
  clock: "caller",
});
// The same with analytics on at its defaults (counts flushed to Redis at most every 5 s per
// isolate): what the flushes add to a decision's bill.
const OURS_ANALYTICS_CONFIG = JSON.stringify({
  rules: [],
  timeoutMs: 500,
  failMode: "open",
  analytics: { enabled: true },
});
/** @param {string[]} algorithms @returns {Contender[]} */
const contendersFor = (algorithms) => [
  ...algorithms.map((algorithm) => ({
    id: oursId(algorithm),
    name: `edge-limiter ${algorithm}`,
    bundle: /** @type {const} */ ("ours"),
    bindings: { LIMITER_CONFIG: OURS_CONFIG },
    ...(algorithm === "sliding-log" ? {} : { extra: { algorithm } }),
  })),
  {
    id: "anchorSliding",
    name: "@upstash/ratelimit slidingWindow",
    bundle: "anchor",
    bindings: { ANCHOR_ALGORITHM: "slidingWindow", ANCHOR_TIMEOUT_MS: "500" },
  },
  {
    id: "anchorFixed",
    name: "@upstash/ratelimit fixedWindow",
    bundle: "anchor",
    bindings: { ANCHOR_ALGORITHM: "fixedWindow", ANCHOR_TIMEOUT_MS: "500" },
  },
];

/** @type {(() => Promise<void>)[]} */
const cleanups = [];
async function cleanup() {
  for (const fn of cleanups.reverse()) await fn().catch(() => {});
  cleanups.length = 0;
}
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM"])) {
  process.on(signal, () => cleanup().finally(() => process.exit(130)));
}

/**
 * A private redis-server (never the shared one: INFO commandstats must see only our traffic), the
 * REST bridge in front of it and a stats connection, all stopped by cleanup().
 */
async function startStore() {
  progress("starting a private redis-server and the REST bridge");
  const redis = await startPrivateRedis();
  cleanups.push(redis.stop);
  const bridge = await startBridgeProcess(redis.url);
  cleanups.push(bridge.stop);
  const stats = connectStats(redis.url);
  cleanups.push(stats.close);
  return { bridge, stats };
}

/**
 * `--only=<name>`: the section's results into OUTPUT/<name>.json and <name>.md, then exit.
 * @param {string} name
 * @param {string} markdown
 */
async function finishOnly(name, markdown) {
  results.seconds = (Date.now() - started) / 1000;
  mkdirSync(OUTPUT, { recursive: true });
  writeFileSync(path.join(OUTPUT, `${name}.json`), `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(
    path.join(OUTPUT, `${name}.md`),
    `# edge-limiter ${name} benchmark\n\n\`npm run bench -- --only=${name}${quick ? " --quick" : ""}\`, ${results.date}, ` +
      `Node ${results.machine.node}, ${results.machine.cpus} cores, ${results.seconds.toFixed(0)} s.\n\n${markdown}`,
  );
  progress(`done: ${path.relative(ROOT, path.join(OUTPUT, `${name}.md`))}`);
  if (name in ALONE_SECTIONS) {
    const name_ = /** @type {keyof typeof ALONE_SECTIONS} */ (name);
    progress(`done: ${publishAlone(quick, name_)}`);
  }
  await cleanup();
  await delay(10);
  process.exit(0);
}

/** @type {any} */
const results = {
  mode: quick ? "quick" : "full",
  date: new Date().toISOString(),
  machine: { node: process.version, cpus: (await import("node:os")).cpus().length },
  plan: PLAN,
};

try {
  const tmp = tempDir();
  cleanups.push(async () => rmSync(tmp, { recursive: true, force: true }));

  if (plansOnly) {
    // Library level: no workers to build.
    const { bridge, stats } = await startStore();
    results.plans = await runPlansBench({ tmp, stats, bridge, quick, progress });
    console.table(plansTable(results.plans));
    await finishOnly("plans", plansMarkdown(results.plans));
  }
  if (limitChangeOnly) {
    // The scripts called straight on their own private redis-server: no workers to build.
    results.limitChange = await runLimitChange({
      quick,
      progress,
      ...(baselineRef ? { baseline: baselineRef } : {}),
    });
    await finishOnly("limit-change", limitChangeMarkdown(results.limitChange));
  }
  if (shardsOnly) {
    // Its own databases, bridges and builds (bench/shards.mjs).
    const shards = await runShardsBench({ quick, progress });
    writeShardsOutput(shards, `npm run bench -- --only=shards${quick ? " --quick" : ""}`, quick);
    await cleanup();
    process.exit(0);
  }
  if (concurrencyOnly) {
    // Its own store, origin and build (bench/concurrency.mjs).
    const concurrency = await runConcurrencyBench({ quick, progress });
    writeConcurrencyOutput(
      concurrency,
      `npm run bench -- --only=concurrency${quick ? " --quick" : ""}`,
      quick,
    );
    await cleanup();
    process.exit(0);
  }
  if (usageOnly) {
    // Its own store, origin and build (bench/usage.mjs).
    const usage = await runUsageBench({ quick, progress });
    writeUsageOutput(usage, `npm run bench -- --only=usage${quick ? " --quick" : ""}`, quick);
    await cleanup();
    process.exit(0);
  }
  progress("building both workers with wrangler deploy --dry-run, and src/ for Node with esbuild");
  const bundles = await buildWorkers(tmp);
  if (regionsOnly) {
    results.regions = await runRegionsBench({ bundles, quick, progress });
    await finishOnly("regions", regionsMarkdown(results.regions));
  }
  if (slowRegionOnly) {
    results.slowRegion = await runSlowRegionBench({ bundles, quick, progress });
    await finishOnly("regions-slow", slowRegionMarkdown(results.slowRegion));
  }
  const lib = await loadLibraries(tmp);
  const CONTENDERS = contendersFor(lib.ALGORITHMS ?? ["sliding-log"]);
  results.contenders = CONTENDERS.map(({ id, name }) => ({ id, name }));
  const { bridge, stats } = await startStore();

  /**
   * Billed commands per decision by traffic shape (bench/lib/billed-commands.mjs): ours on the
   * Redis clock (the default) and on the caller's, the anchor (slidingWindow, ephemeral cache
   * on), and ours with `"lease": true` on the busy shapes (lease calls and give-backs counted).
   * Each worker served for this section alone, disposed after it.
   */
  const billedSection = async () => {
    progress("billed commands: serving ours, ours on the caller clock and the anchor");
    const anchorBindings = CONTENDERS.find((c) => c.id === "anchorSliding")?.bindings ?? {};
    /** @type {[string, string, string, Record<string, string>, string[]?][]} */
    const served = [
      ["ours", "edge-limiter (Redis clock)", bundles.ours, { LIMITER_CONFIG: OURS_CONFIG }],
      [
        "oursCallerClock",
        'edge-limiter, `"clock": "caller"`',
        bundles.ours,
        { LIMITER_CONFIG: OURS_CALLER_CLOCK_CONFIG },
      ],
      ["anchor", "@upstash/ratelimit slidingWindow", bundles.anchor, anchorBindings],
      [
        "oursAnalytics",
        "edge-limiter with analytics on (sparse and mixed shapes only)",
        bundles.ours,
        { LIMITER_CONFIG: OURS_ANALYTICS_CONFIG },
        ["sparse", "mixed"],
      ],
    ];
    /** @type {import("./lib/billed-commands.mjs").BilledContender[]} */
    const contenders = [];
    /** @type {(() => Promise<void>)[]} */
    const disposals = [];
    try {
      for (const [id, name, scriptPath, bindings, shapes] of served) {
        const worker = await serveWorker({
          scriptPath,
          bindings: { ...storeBindings, ...bindings },
        });
        // Disposed after the section; the cleanup only covers a failure during it (dispose once).
        let disposed = false;
        const dispose = async () => {
          if (!disposed) await worker.dispose();
          disposed = true;
        };
        cleanups.push(dispose);
        disposals.push(dispose);
        contenders.push({ id, name, url: worker.url, ...(shapes ? { shapes } : {}) });
      }
      const ours = /** @type {{ url: string }} */ (contenders[0]);
      contenders.push({
        id: "oursLease",
        name: 'edge-limiter, `"lease": true` in the body (busy shapes only)',
        url: ours.url,
        extra: { lease: true },
        shapes: ["busy"],
      });
      return await runBilledCommands({ stats, contenders, quick, progress });
    } finally {
      for (const dispose of disposals) await dispose();
    }
  };
  const storeBindings = {
    UPSTASH_REDIS_REST_URL: bridge.url,
    UPSTASH_REDIS_REST_TOKEN: bridge.token,
    LIMITER_TOKEN,
  };
  if (billedOnly) {
    results.billed = await billedSection();
    mkdirSync(OUTPUT, { recursive: true });
    writeFileSync(path.join(OUTPUT, "billed.json"), `${JSON.stringify(results, null, 2)}\n`);
    console.table(billedTable(results.billed));
    progress(`done: ${path.relative(ROOT, path.join(OUTPUT, "billed.json"))}`);
    await cleanup();
    await delay(10);
    process.exit(0);
  }

  /** @param {Contender} c @param {string} storeUrl */
  const serve = async (c, storeUrl) => {
    const worker = await serveWorker({
      scriptPath: bundles[c.bundle],
      bindings: {
        UPSTASH_REDIS_REST_URL: storeUrl,
        UPSTASH_REDIS_REST_TOKEN: bridge.token,
        LIMITER_TOKEN,
        ...c.bindings,
      },
    });
    if (c.extra) bodyExtras.set(worker.url, c.extra);
    return worker;
  };

  progress("workerd CPU per decision: serving the CPU contenders");
  const origin = await startOrigin();
  cleanups.push(origin.close);
  /** @type {Record<string, { url: string, pid: number | undefined, dispose: () => Promise<void> }>} */
  const cpuWorkers = {};
  // A ref, or a bundle already built (an experiment: `wrangler deploy --dry-run --outdir`).
  const baseline = baselineRef?.endsWith(".js")
    ? baselineRef
    : baselineRef
      ? await buildBaseline(tmp, baselineRef)
      : undefined;
  if (baselineRef) results.baselineRef = baselineRef;
  /** @type {any[][]} */
  const cpuServed = [
    ["ours", bundles.ours, { LIMITER_CONFIG: OURS_CONFIG }],
    ...(baseline ? [["oursBaseline", baseline, { LIMITER_CONFIG: OURS_CONFIG }]] : []),
    ["anchorMinimal", bundles.anchorMinimal, {}],
    ["floor", bundles.floor, {}],
    ["anchorSliding", bundles.anchor, CONTENDERS.find((c) => c.id === "anchorSliding")?.bindings],
    ...["oursProxy", "oursForward"].map((id) => [
      id,
      bundles.ours,
      {
        LIMITER_CONFIG: JSON.stringify({ rules: PROXY_RULES, timeoutMs: 500, failMode: "open" }),
        ORIGIN_URL: origin.url,
      },
    ]),
  ];
  // --cpu-ids=a,b: only those CPU contenders (iterating on one comparison with --only=cpu).
  const cpuIds = process.argv
    .find((a) => a.startsWith("--cpu-ids="))
    ?.slice(10)
    .split(",");
  // Each served by workerd alone, as deployed (tools/serve-workerd.mjs). The pair served
  // through Miniflare went with Miniflare 5, whose options no longer take a bare script.
  for (const [id, scriptPath, bindings] of cpuServed) {
    if (cpuIds && !cpuIds.includes(id)) continue;
    const all = { ...storeBindings, ...bindings };
    const worker = await serveWorker({ scriptPath, bindings: all });
    // Disposed after the section; the cleanup only covers a failure during it (dispose once).
    let disposed = false;
    worker.dispose = ((dispose) => async () => {
      if (!disposed) await dispose();
      disposed = true;
    })(worker.dispose);
    cleanups.push(worker.dispose);
    cpuWorkers[id] = worker;
  }
  results.workerdCpu = await measureWorkerdCpu({
    workers: /** @type {any} */ (cpuWorkers),
    repeats: PLAN.cpuRepeats,
    seconds: PLAN.cpuSeconds,
    rotations: PLAN.cpuRotations,
    sliceSeconds: PLAN.cpuSlice,
    connections: PLAN.connections,
    rate: PLAN.cpuRate,
    progress,
  });
  const wc = results.workerdCpu;
  progress(
    `workerd CPU at ${PLAN.cpuRate}/s: ours ÷ anchor (minimal front) ${wc.ratios.cpuVsMinimal.toFixed(2)}×, ` +
      (baseline ? `ours ÷ ${baselineRef} ${wc.ratios.cpuVsBaseline.toFixed(2)}×, ` : "") +
      `throughput ${wc.ratios.throughputVsMinimal.toFixed(2)}×; ours ÷ anchor (our /check code) ` +
      `${wc.ratios.cpuVsLikeForLike.toFixed(2)}×; proxy beyond /check ` +
      `${wc.proxy.beyondCheckUsec.toFixed(0)} µs, beyond forwarding ${wc.proxy.beyondForwardUsec.toFixed(0)} µs`,
  );
  for (const worker of Object.values(cpuWorkers)) await worker.dispose();

  // Where the CPU goes: a V8 profile of each worker inside workerd (served alone, its inspector
  // on), flat out under the same load; shares by part (bench/lib/cpu-profile.mjs).
  progress("workerd CPU: profiling where it goes (V8 profiler through workerd's inspector)");
  wc.profiles = {};
  for (const [id, scriptPath, bindings] of cpuServed) {
    if (!["ours", "oursBaseline", "anchorMinimal", "oursProxy"].includes(id)) continue;
    if (cpuIds && !cpuIds.includes(id)) continue;
    const worker = await serveWorker({
      scriptPath,
      inspector: true,
      bindings: { ...storeBindings, ...bindings },
    });
    const inspectorPort = /** @type {number} */ (worker.inspectorPort);
    try {
      /** @param {string} tag @param {number} seconds */
      const load = (tag, seconds) =>
        id === "oursProxy"
          ? runProxyLoad({ url: worker.url, tag, seconds, connections: 32, matched: true })
          : runLoad({ url: worker.url, load: "mixed", tag, seconds, connections: 32 });
      await load(`pw${Date.now()}`, 1);
      const { profile, result } = await profileWorkerd(inspectorPort, () =>
        load(`pp${Date.now()}`, PLAN.cpuSeconds),
      );
      wc.profiles[id] = { parts: cpuByPart(profile, scriptPath), decisions: result.decisions };
      progress(
        `profile ${id}: ${Object.entries(wc.profiles[id].parts)
          .sort((a, b) => /** @type {number} */ (b[1]) - /** @type {number} */ (a[1]))
          .slice(0, 4)
          .map(([part, share]) => `${part} ${(/** @type {number} */ (share) * 100).toFixed(0)} %`)
          .join(", ")}`,
      );
    } finally {
      await worker.dispose();
    }
  }
  if (cpuOnly) {
    mkdirSync(OUTPUT, { recursive: true });
    writeFileSync(path.join(OUTPUT, "cpu.json"), `${JSON.stringify(results, null, 2)}\n`);
    progress(`done: ${path.relative(ROOT, path.join(OUTPUT, "cpu.json"))}`);
    await cleanup();
    await delay(10);
    process.exit(0);
  }

  results.billed = await billedSection();

  // Plans: overrides and blocks beside the anchor's dynamic limits and deny list, library level
  // (bench/lib/plans-bench.mjs), on the same redis-server, before anything patches fetch.
  results.plans = await runPlansBench({ tmp, stats, bridge, quick, progress });

  progress("serving the workers from workerd");
  /** @type {Record<string, { url: string, dispose: () => Promise<void> }>} */
  const main = {};
  for (const c of CONTENDERS) {
    const worker = await serve(c, bridge.url);
    main[c.id] = worker;
    cleanups.push(worker.dispose);
  }
  const url = (/** @type {string} */ id) => /** @type {{ url: string }} */ (main[id]).url;

  // ---------------------------------------------------------------- throughput, alternating
  progress("warming up");
  for (const c of CONTENDERS) {
    await runLoad({ url: url(c.id), load: "allowed", tag: "warm", seconds: 1, connections: 8 });
  }
  /** @type {Record<string, Record<string, any[]>>} */
  const runs = {};
  const order = CONTENDERS.map((c) => c.id);
  for (let rep = 0; rep < PLAN.repeats; rep++) {
    for (const load of Object.keys(LOADS)) {
      // A B C, then C B A: no contender always runs first or last.
      const ids = rep % 2 === 0 ? order : [...order].reverse();
      for (const id of ids) {
        const before = await stats.snapshot();
        const run = await runLoad({
          url: url(id),
          load: /** @type {keyof typeof LOADS} */ (load),
          tag: `t${rep}`,
          seconds: PLAN.seconds,
          connections: PLAN.connections,
        });
        const redisWork = stats.perDecision(before, await stats.snapshot(), run.decisions);
        const byId = runs[load] ?? {};
        byId[id] = [...(byId[id] ?? []), { ...run, redis: redisWork }];
        runs[load] = byId;
        progress(
          `${load.padEnd(7)} ${id.padEnd(13)} rep ${rep + 1}/${PLAN.repeats}: ` +
            `${run.perSecond.toFixed(0)} decisions/s, p50 ${run.p50} ms, p99 ${run.p99} ms, ` +
            `${redisWork.commands.toFixed(2)} Redis cmds/decision, errors ${run.errors}`,
        );
      }
    }
  }
  results.throughput = Object.fromEntries(
    Object.entries(runs).map(([load, byId]) => [
      load,
      Object.fromEntries(
        Object.entries(byId).map(([id, list]) => [
          id,
          {
            perSecond: median(list.map((r) => r.perSecond)),
            p50: median(list.map((r) => r.p50)),
            p99: median(list.map((r) => r.p99)),
            deniedShare: median(list.map((r) => r.denied / r.decisions)),
            errors: list.reduce((sum, r) => sum + r.errors, 0),
            storeCalls: median(list.map((r) => r.redis.storeCalls)),
            commands: median(list.map((r) => r.redis.commands)),
            scriptUsec: median(list.map((r) => r.redis.scriptUsec)),
            redisCpuUsec: median(list.map((r) => r.redis.cpuUsec)),
            byCommand: list[0].redis.byCommand,
            percentiles: list[Math.floor(list.length / 2)].percentiles,
            runs: list.map(({ percentiles: _p, ...rest }) => rest),
          },
        ]),
      ),
    ]),
  );

  // ---------------------------------------------------------------- round trips on the wire
  progress("counting round trips per decision through a counting proxy");
  const proxy = await startCountingProxy(bridge.url);
  cleanups.push(proxy.close);
  results.roundTrips = {};
  for (const c of CONTENDERS) {
    const worker = await serve(c, proxy.url);
    const tag = `rt-${Date.now()}`;
    for (let i = 0; i < 20; i++)
      await check(worker.url, { key: `${tag}:warm${i}`, limit: 100, window: "1m" });
    proxy.reset();
    const allowedN = 200;
    for (let i = 0; i < allowedN; i++) {
      await check(worker.url, { key: `${tag}:a${i}`, limit: 100, window: "1m" });
    }
    const allowed = { ...proxy.counts };
    const flood = { key: `${tag}:flood`, limit: 10, window: "1m" };
    for (let i = 0; i < 10; i++) await check(worker.url, flood);
    proxy.reset();
    /** @type {Record<string, number>} */
    const sources = {};
    for (let i = 0; i < 1000; i++) {
      const d = await check(worker.url, flood);
      sources[d.source] = (sources[d.source] ?? 0) + 1;
    }
    results.roundTrips[c.id] = {
      perAllowed: allowed.requests / allowedN,
      commandsPerAllowed: allowed.commands / allowedN,
      storeCallsPer1000Denied: proxy.counts.requests,
      deniedSources: sources,
    };
    progress(
      `${c.id}: ${(allowed.requests / allowedN).toFixed(2)} round trips per allowed decision, ` +
        `${proxy.counts.requests} store calls per 1000 denied (${JSON.stringify(sources)})`,
    );
    await worker.dispose();
  }

  // ---------------------------------------------------------------- outage
  progress("outage: store hangs / store refuses");
  const hanging = await startHangingStore();
  cleanups.push(hanging.close);
  const refusing = await refusingStoreUrl();
  results.outage = {};
  for (const c of CONTENDERS) {
    const base = await runLoad({
      url: url(c.id),
      load: "allowed",
      tag: "ob",
      seconds: PLAN.outageSeconds,
      connections: 10,
    });
    const entry = { baselineP50: base.p50, baselineP99: base.p99 };
    for (const [fault, storeUrl] of /** @type {const} */ ([
      ["hang", hanging.url],
      ["refuse", refusing],
    ])) {
      const worker = await serve(c, storeUrl);
      const run = await runLoad({
        url: worker.url,
        load: "allowed",
        tag: fault,
        seconds: PLAN.outageSeconds,
        connections: 10,
      });
      await worker.dispose();
      Object.assign(entry, {
        [fault]: {
          p50: run.p50,
          p99: run.p99,
          addedP50: run.p50 - base.p50,
          addedP99: run.p99 - base.p99,
          perSecond: run.perSecond,
          allowedShare: run.allowed / Math.max(1, run.decisions),
          errors: run.errors,
        },
      });
      progress(`${c.id} ${fault}: p50 ${run.p50} ms (healthy ${base.p50}), p99 ${run.p99} ms`);
    }
    results.outage[c.id] = entry;
  }

  // ---------------------------------------------------------------- accuracy
  progress("accuracy: steady sender above its limit, bursts at a window edge");
  const steady = { limit: 10, windowMs: 1000, rate: 25, seconds: PLAN.steadySeconds };
  results.accuracy = { steady: { ...steady }, edge: { limit: 10, windowMs: 2000, gapMs: 200 } };
  const steadySamples = await Promise.all(
    CONTENDERS.map((c) => steadySender(url(c.id), { key: `steady-${Date.now()}`, ...steady })),
  );
  /** @type {Record<string, [number, number][]>} */
  const rolling = {};
  CONTENDERS.forEach((c, i) => {
    const samples = steadySamples[i] ?? [];
    results.accuracy.steady[c.id] = analyse(samples, steady.limit, steady.windowMs);
    rolling[c.id] = rollingAdmissions(samples, steady.windowMs, 50);
    const a = results.accuracy.steady[c.id];
    progress(
      `${c.id} steady: admitted ${a.admitted}/${a.ideal} of capacity (${(a.share * 100).toFixed(1)} %), max ${a.maxInWindow} in a window (limit ${steady.limit})`,
    );
  });
  for (const c of CONTENDERS) {
    /** @type {ReturnType<typeof analyse>[]} */
    const edges = [];
    for (let e = 0; e < PLAN.edges; e++) {
      const samples = await edgeBursts(url(c.id), {
        key: `edge-${Date.now()}-${e}`,
        ...results.accuracy.edge,
      });
      edges.push(analyse(samples, 10, 2000));
    }
    results.accuracy.edge[c.id] = {
      admitted: median(edges.map((x) => x.admitted)),
      ideal: median(edges.map((x) => x.ideal)),
      share: median(edges.map((x) => x.share)),
      maxInWindow: Math.max(...edges.map((x) => x.maxInWindow)),
    };
    const a = results.accuracy.edge[c.id];
    progress(
      `${c.id} edge: admitted ${a.admitted} (exact: ${a.ideal}), max ${a.maxInWindow} in a window`,
    );
  }

  // ---------------------------------------------------------------- library level (Node)
  progress("library level");
  installInstantTransport(bridge.url);
  const fast = libraryContenders(lib, { url: INSTANT_URL, token: bridge.token, prefix: "instant" });
  results.library = { cpu: {}, throughput: {}, memory: {} };
  const cpuCount = quick ? 5000 : 20_000;
  for (const c of CONTENDERS) {
    const limit = /** @type {import("./lib/library.mjs").LibLimit} */ (
      fast[/** @type {keyof typeof fast} */ (c.id)]
    );
    const tag = `cpu${Date.now()}`;
    const allowed = await cpuPerDecision(limit, {
      tag,
      count: cpuCount,
      keyOf: (i) => `k${i % 1000}`,
      limit: 100,
      windowMs: 60_000,
    });
    const denied = await cpuPerDecision(limit, {
      tag,
      count: cpuCount,
      keyOf: (i) => `d${i % 10}`,
      limit: 10,
      windowMs: 60_000,
    });
    results.library.cpu[c.id] = { allowed, denied };
    progress(
      `${c.id} CPU/decision: allowed ${allowed.cpuUsec.toFixed(1)} µs, denied ${denied.cpuUsec.toFixed(1)} µs (${denied.storeCallsPerDecision.toFixed(2)} store calls)`,
    );
  }

  const real = libraryContenders(lib, { url: bridge.url, token: bridge.token, prefix: "benchlib" });
  /** @type {Record<string, number[]>} */
  const libRuns = {};
  for (let rep = 0; rep < PLAN.repeats; rep++) {
    const ids = rep % 2 === 0 ? order : [...order].reverse();
    for (const id of ids) {
      const limit = /** @type {import("./lib/library.mjs").LibLimit} */ (
        real[/** @type {keyof typeof real} */ (id)]
      );
      const run = await libraryThroughput(limit, {
        seconds: PLAN.seconds / 2,
        concurrency: PLAN.connections,
        body: (n) => {
          const b = /** @type {{ key: string, limit: number }} */ (LOADS.mixed?.(`l${rep}`, n));
          return { key: b.key, limit: b.limit, windowMs: 60_000 };
        },
      });
      libRuns[id] = [...(libRuns[id] ?? []), run.perSecond];
      progress(
        `library mixed ${id}: ${run.perSecond.toFixed(0)} decisions/s (errors ${run.errors})`,
      );
    }
  }
  for (const [id, list] of Object.entries(libRuns)) results.library.throughput[id] = median(list);

  progress(`memory per key (MEMORY USAGE) at limits ${MEMORY_LIMITS.join(" / ")}`);
  const memTag = `m${Date.now()}`;
  for (const c of CONTENDERS) {
    const limit = /** @type {import("./lib/library.mjs").LibLimit} */ (
      real[/** @type {keyof typeof real} */ (c.id)]
    );
    results.library.memory[c.id] = {};
    for (const max of MEMORY_LIMITS) {
      // No key is a prefix of another (10 vs 100), so each pattern below matches one client.
      const key = `${memTag}.${c.id}.${max}.k`;
      let next = 0;
      await Promise.all(
        Array.from({ length: 32 }, async () => {
          while (next < max) {
            next++;
            await limit(key, max, 3_600_000);
          }
        }),
      );
      const pattern = c.id.startsWith("ours")
        ? `benchlib:*${key}*`
        : `benchlib-anchor:${c.id === "anchorFixed" ? "fixedWindow" : "slidingWindow"}:${max}:*:${key}:*`;
      const { bytes, keys } = await stats.memoryOf(pattern);
      results.library.memory[c.id][max] = { bytes, keys };
    }
    progress(`${c.id} memory: ${JSON.stringify(results.library.memory[c.id])}`);
  }

  // Leases with a distant store (bench/lib/lease-bench.mjs; docs/leases.md).
  results.leases = await runLeaseBench({
    bridge,
    bundles,
    seconds: quick ? 3 : 8,
    repeats: quick ? 1 : 3,
    rate: 300,
    progress,
  });

  // The exact log's two layouts per limit, beside the anchor (bench/lib/log-layouts.mjs).
  results.logLayouts = await runLogLayouts({ quick, progress });

  // Regions: three databases behind delay proxies (bench/lib/regions-bench.mjs; docs/regions.md).
  results.regions = await runRegionsBench({ bundles, quick, progress });

  results.seconds = (Date.now() - started) / 1000;
  mkdirSync(OUTPUT, { recursive: true });
  writeFileSync(path.join(OUTPUT, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
  writeReport(OUTPUT, results, rolling);
  appendFileSync(path.join(OUTPUT, "results.md"), `\n${leaseMarkdown(results.leases)}`);
  appendFileSync(path.join(OUTPUT, "results.md"), `\n${logLayoutsMarkdown(results.logLayouts)}`);
  appendFileSync(path.join(OUTPUT, "results.md"), `\n${billedMarkdown(results.billed)}`);
  appendFileSync(path.join(OUTPUT, "results.md"), `\n${plansMarkdown(results.plans)}`);
  appendFileSync(path.join(OUTPUT, "results.md"), `\n${regionsMarkdown(results.regions)}`);
  console.table(billedTable(results.billed));
  console.table(plansTable(results.plans));
  progress(
    `done: ${path.relative(ROOT, OUTPUT)}/results.md, results.json (${results.seconds.toFixed(0)} s)`,
  );
  progress(`done: ${publishMain(quick)}`);
} catch (error) {
  console.error(error);
  process.exitCode = 1;
} finally {
  await cleanup();
  await delay(10);
  // Miniflare and the HTTP agents may hold handles open; everything we started is stopped.
  process.exit(process.exitCode ?? 0);
}
