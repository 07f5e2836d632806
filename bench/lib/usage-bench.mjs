// @ts-check
// The usage section (docs/usage.md; bench/usage.mjs runs it and writes its report): the worker as
// deployed, served by workerd alone twice (two isolates sharing nothing but the store), on one
// private redis-server behind the REST bridge (capped far above the load so that scripts' inner
// commands are billed exactly), in front of an origin streaming OpenAI-like event streams
// (bench/lib/sse-origin.mjs, its own process), usage in the last event.
//
// Time is scaled: the rules' window is WINDOW_S (10 s) where a customer's budget would be per
// minute, the limit scaled with it (7 000 tokens per 10 s ≙ 42 000 a minute), so a run sees
// several windows in a minute.
//
// 1. Overload: CUSTOMERS customers, each sending at OVERLOAD× its budget (Poisson arrivals of
//    seeded responses: 50–2 000 tokens, 0.3–2 s) through both workers in turn; once with a
//    covering reservation (cost 2 000), once with a small one (the median); the same seed, so the
//    same offered load. From the origin's records: the most usage charged in any rolling window
//    (per customer) against the limit, overdraws against the documented bound, the share of the
//    budget used; billed commands over the load.
// 2. Side by side: the same streams through a usage rule, through a usage rule read from a header
//    (the body not read: what the reading costs apart from the reservation and the settle) and
//    through a plain rate rule (no usage), every stream admitted, in slices rotated round by
//    round: time to first byte and both workerd processes' CPU per streamed response.
// 3. Billed commands per request, admission and settle apart: a batch of streams held open 3 s,
//    the bridge read once every admission is answered and again after every settle.
// 4. Event streams without usage of 10, 40 and 160 MB through a workerd whose V8 heap is capped
//    at 32 MB: each passes whole or the isolate ends; that workerd's resident memory as each
//    passes, beside the plain rule's.
import { rmSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import path from "node:path";
import {
  delay,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
  wranglerBundle,
} from "../../tools/infra.mjs";
import { quietStats } from "./bridge-stats.mjs";
import { LIMITER_TOKEN } from "./load.mjs";
import { connectStats } from "./redis-stats.mjs";
import { EVENT_MS, now, startSseOrigin } from "./sse-origin.mjs";
import { rssKbOf, streamThrough } from "./usage-client.mjs";
import {
  allWindows,
  CERTAIN_SETTLE_MS,
  DURATION_MS,
  median,
  quantile,
  responseShape,
  SETTLE_SLACK_MS,
  seededRandom,
  TOKENS,
} from "./usage-windows.mjs";
import { processCpuMs } from "./workerd-cpu.mjs";

/** The bridge's cap: never reached, set so that scripts' inner commands are billed exactly. */
const CAP = 1_000_000;
const WINDOW_S = 10;
const LIMIT = 7000;
const CUSTOMERS = 20;
const OVERLOAD = 2;
const COVERING = TOKENS.max;
/** The median response, to the nearest ten. */
const SMALL = Math.round(TOKENS.median / 10) * 10;
const STORE_TIMEOUT_MS = 2000;
const BIG_BYTES = 10 * 1024 * 1024;
/** Part 4's V8 heap cap (old space), MB: well under what the longest stream passes. */
const HEAP_CAP_MB = 32;
/** Part 3: every stream held open this long, so that no settle runs before the first read. */
const HELD_MS = 3000;

/** @param {string} name @param {number} cost @param {number} [limit] */
const usageRule = (name, cost, limit = LIMIT) => ({
  name,
  match: { path: `/${name}/*` },
  key: "header:x-customer",
  limit,
  window: `${WINDOW_S}s`,
  cost,
  usage: { json: "usage.total_tokens" },
});

const CONFIG = {
  timeoutMs: STORE_TIMEOUT_MS,
  rules: [
    usageRule("covering", COVERING),
    usageRule("small", SMALL),
    // Parts 2–4: every request admitted.
    usageRule("usage", COVERING, 1_000_000_000),
    {
      ...usageRule("header", COVERING, 1_000_000_000),
      usage: { header: "x-usage-tokens" },
    },
    {
      name: "plain",
      match: { path: "/plain/*" },
      key: "header:x-customer",
      limit: 100_000,
      window: `${WINDOW_S}s`,
    },
  ],
};

/**
 * @typedef {{ workers: string[], pids: number[], bridge: { url: string, token: string },
 *   origin: Awaited<ReturnType<typeof startSseOrigin>>, stats: ReturnType<typeof connectStats>,
 *   run: string }} Rig
 */

/**
 * The whole section.
 * @param {{ quick?: boolean, progress?: (line: string) => void }} [options]
 */
export async function runUsageBench({
  quick = false,
  progress = (line) => console.log(line),
} = {}) {
  const plan = {
    windowSeconds: WINDOW_S,
    limit: LIMIT,
    customers: CUSTOMERS,
    overload: OVERLOAD,
    requestsPerSecondPerCustomer: (OVERLOAD * LIMIT) / (WINDOW_S * TOKENS.mean),
    tokens: TOKENS,
    durationMs: DURATION_MS,
    eventMs: EVENT_MS,
    covering: COVERING,
    small: SMALL,
    overloadSeconds: quick ? 25 : 60,
    rounds: quick ? 2 : 6,
    perSlice: quick ? 30 : 40,
    sliceRate: 20,
    heldBatches: quick ? 2 : 5,
    heldMs: HELD_MS,
    bigBytes: BIG_BYTES,
    heapCapMb: HEAP_CAP_MB,
    bigRepeats: quick ? 4 : 8,
    bigLengths: quick ? [BIG_BYTES, BIG_BYTES * 4] : [BIG_BYTES, BIG_BYTES * 4, BIG_BYTES * 16],
    settleSlackMs: SETTLE_SLACK_MS,
    certainSettleMs: CERTAIN_SETTLE_MS,
    bridgeCap: CAP,
    storeTimeoutMs: STORE_TIMEOUT_MS,
  };
  const tmp = tempDir();
  /** @type {(() => Promise<void>)[]} */
  const cleanups = [];
  const started = Date.now();
  const load = { before: loadavg(), after: loadavg() };
  try {
    progress("building the worker with wrangler deploy --dry-run");
    const bundle = await wranglerBundle(path.join(tmp, "ours"));
    progress(`starting a private redis-server, the bridge (cap ${CAP}/s) and the SSE origin`);
    const redis = await startPrivateRedis();
    cleanups.push(redis.stop);
    const bridge = await startBridgeProcess(redis.url, { maxCommandsPerSecond: CAP });
    cleanups.push(bridge.stop);
    const origin = await startSseOrigin();
    cleanups.push(origin.stop);
    const stats = connectStats(redis.url);
    cleanups.push(stats.close);
    const bindings = {
      LIMITER_TOKEN,
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
      ORIGIN_URL: origin.url,
      LIMITER_CONFIG: JSON.stringify(CONFIG),
    };
    progress("serving it twice, each in its own workerd process");
    /** @type {Rig} */
    const rig = { workers: [], pids: [], bridge, origin, stats, run: Date.now().toString(36) };
    for (let i = 0; i < 2; i++) {
      const served = await serveWorker({ scriptPath: bundle, bindings });
      cleanups.push(served.dispose);
      if (served.pid === undefined) throw new Error("no workerd pid: cannot read its CPU");
      rig.workers.push(served.url);
      rig.pids.push(served.pid);
    }
    for (let on = 0; on < 2; on++) {
      for (const rule of ["covering", "small", "usage", "header", "plain"]) {
        await streamThrough(rig.workers, on, `/${rule}/warm?tokens=50&ms=0`, `warm-${rig.run}`);
      }
    }
    load.before = loadavg();

    /** @type {Record<string, Awaited<ReturnType<typeof overloadRun>>>} */
    const overloads = {};
    for (const [rule, cost] of /** @type {const} */ ([
      ["covering", COVERING],
      ["small", SMALL],
    ])) {
      progress(
        `1. ${CUSTOMERS} customers at ${OVERLOAD}× a budget of ${LIMIT} per ${WINDOW_S} s, ` +
          `cost ${cost}, ${plan.overloadSeconds} s`,
      );
      const o = await overloadRun(rig, { rule, cost, seconds: plan.overloadSeconds });
      overloads[rule] = o;
      progress(
        `   most in a window ${o.windows.most} (limit ${LIMIT}), windows over ${o.windows.overLimit}, ` +
          `worst overdraw ${o.windows.worstOverdraw} (bound ${o.windows.worstBound}), ` +
          `budget used ${(o.share.mean * 100).toFixed(1)} %, 200/429 ${o.statuses.ok}/${o.statuses.denied}`,
      );
    }

    progress(`2. usage rule vs plain rule, ${plan.rounds} rounds of ${plan.perSlice} streams each`);
    const side = await sideBySide(rig, plan);
    progress(
      `   TTFB p50 ${side.usage.ttfbP50.toFixed(2)} vs ${side.plain.ttfbP50.toFixed(2)} ms, CPU/stream ` +
        `${side.usage.cpuUsPerStream.toFixed(0)} vs ${side.plain.cpuUsPerStream.toFixed(0)} µs`,
    );

    progress(`3. billed commands, admission and settle apart, ${plan.heldBatches} batches`);
    const billed = await billedApart(rig, plan);
    for (const row of billed) {
      progress(
        `   ${row.rule}: admission ${row.admission.toFixed(2)}, settle ${row.settle.toFixed(2)}`,
      );
    }

    progress(
      `4. event streams without usage: ${plan.bigLengths.map((b) => b / 1024 / 1024).join(", ")} MB`,
    );
    const capped = await serveWorker({
      scriptPath: bundle,
      bindings,
      v8Flags: [`--max-old-space-size=${HEAP_CAP_MB}`],
    });
    cleanups.push(capped.dispose);
    if (capped.pid === undefined) throw new Error("no workerd pid: cannot read its memory");
    for (const rule of ["usage", "plain"]) {
      await streamThrough([capped.url], 0, `/${rule}/warm?bytes=65536`, `warm-${rig.run}`);
    }
    const cappedRig = { pid: capped.pid, url: capped.url, run: rig.run };
    const big = await bigStreams(cappedRig, plan);
    for (const row of big) {
      progress(`   ${row.rule}: ${row.bytes} bytes, RSS +${row.growthKb} kB`);
    }
    progress(`   the 40 MB stream ${plan.bigRepeats} times in a row, each rule`);
    const repeated = await repeatedStreams(cappedRig, plan);
    progress(`   RSS after each, usage rule: ${repeated.usage?.join(", ")} kB`);
    load.after = loadavg();

    return {
      date: new Date().toISOString(),
      machine: { node: process.version, cpus: cpus().length, load },
      plan,
      config: CONFIG,
      overloads,
      side,
      billed,
      big,
      repeated,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Part 1: every customer's Poisson arrivals at OVERLOAD× its budget, seeded (the same for both
 * rules), sent through the two workers in turn whatever the answers.
 * @param {Rig} rig
 * @param {{ rule: string, cost: number, seconds: number }} o
 */
async function overloadRun(rig, { rule, cost, seconds }) {
  const { workers, origin, bridge } = rig;
  await origin.reset();
  const before = await quietStats(bridge);
  const perSecond = (OVERLOAD * LIMIT) / (WINDOW_S * TOKENS.mean);
  const start = performance.now();
  let sent = 0;
  /** @type {Map<string, import("./usage-client.mjs").StreamResult>} */
  const answers = new Map();
  const customers = Array.from({ length: CUSTOMERS }, async (_, c) => {
    const random = seededRandom(1000 + c);
    /** @type {Promise<void>[]} */
    const pending = [];
    let at = 0;
    for (let n = 0; ; n++) {
      at += (-Math.log(1 - random()) / perSecond) * 1000;
      if (at > seconds * 1000) break;
      const { tokens, ms } = responseShape(random);
      await delay(Math.max(0, start + at - performance.now()));
      const on = sent++ % 2;
      const path = `/${rule}/c${c}?tokens=${tokens}&ms=${ms}&req=${c}.${n}`;
      pending.push(
        streamThrough(workers, on, path, `c${c}-${rig.run}`).then((r) => {
          answers.set(`${c}.${n}`, r);
        }),
      );
    }
    await Promise.all(pending);
  });
  await Promise.all(customers);
  const after = await quietStats(bridge);
  const records = (await origin.records()).filter((r) => r.tag === rule);
  /** @type {Map<string, import("./usage-windows.mjs").Charged[]>} */
  const byCustomer = new Map();
  for (const r of records) {
    const client = answers.get(r.request);
    const charged = {
      arrival: r.arrival,
      end: r.end,
      // A stream that ended before its usage event keeps its reservation (docs/usage.md).
      tokens: r.tokens > 0 ? r.tokens : cost,
      sent: client?.sentAt ?? r.arrival,
      clientEnd: client?.endedAt ?? r.end,
    };
    byCustomer.set(r.key, [...(byCustomer.get(r.key) ?? []), charged]);
  }
  const budget = (LIMIT * seconds) / WINDOW_S;
  const shares = [...byCustomer.values()].map(
    (streams) => streams.reduce((n, s) => n + s.tokens, 0) / budget,
  );
  const all = [...answers.values()];
  const ok = all.filter((a) => a.status === 200).length;
  const denied = all.filter((a) => a.status === 429).length;
  const billed = after.billedCommands - before.billedCommands;
  return {
    rule,
    cost,
    sent: all.length,
    statuses: { ok, denied, other: all.length - ok - denied },
    streams: records.length,
    incomplete: records.filter((r) => !r.completed).length,
    tokensServed: records.reduce((n, r) => n + r.tokens, 0),
    // How late the origin may see an admission: the most from a request's sending to its arrival.
    mostDelayMs: Math.max(
      0,
      ...[...byCustomer.values()].flatMap((streams) => streams.map((x) => x.arrival - x.sent)),
    ),
    windows: allWindows(byCustomer, { windowMs: WINDOW_S * 1000, limit: LIMIT, cost }),
    share: {
      mean: shares.reduce((a, b) => a + b, 0) / Math.max(1, shares.length),
      min: Math.min(...shares),
      max: Math.max(...shares),
    },
    billed,
    billedPerOk: billed / Math.max(1, ok),
    scriptCalls: after.scriptCalls - before.scriptCalls,
    countedExactly:
      after.countedScriptCalls - before.countedScriptCalls ===
      after.scriptCalls - before.scriptCalls,
    // The raw record, for any other reading of the windows (bench/out/usage.json).
    streamsByCustomer: Object.fromEntries(byCustomer),
  };
}

/** Part 2's contenders: the usage rule (the body read), the same charged from a header (the body
 * passed as it is, the charge before the answer goes out), the plain rule. */
const SIDE = /** @type {const} */ (["usage", "header", "plain"]);

/**
 * Part 2: rounds of slices, each round the same seeded streams through every contender, their
 * order rotated from round to round, every stream admitted; CPU of both workerd processes over
 * each slice (until the bridge is quiet: the settles done).
 * @param {Rig} rig
 * @param {{ rounds: number, perSlice: number, sliceRate: number }} plan
 */
async function sideBySide(rig, { rounds, perSlice, sliceRate }) {
  const { workers, pids, bridge } = rig;
  /** @type {Record<string, { ttfb: number[], cpu: number[], failed: number }>} */
  const got = Object.fromEntries(SIDE.map((c) => [c, { ttfb: [], cpu: [], failed: 0 }]));
  for (let round = 0; round < rounds; round++) {
    for (let s = 0; s < SIDE.length; s++) {
      const rule = /** @type {string} */ (SIDE[(s + round) % SIDE.length]);
      const random = seededRandom(7000 + round);
      await quietStats(bridge);
      const cpuBefore = pids.map(processCpuMs);
      const t0 = performance.now();
      /** @type {Promise<import("./usage-client.mjs").StreamResult>[]} */
      const jobs = [];
      for (let i = 0; i < perSlice; i++) {
        const { tokens, ms } = responseShape(random);
        await delay(Math.max(0, t0 + (i * 1000) / sliceRate - performance.now()));
        const path = `/${rule}/s?tokens=${tokens}&ms=${ms}`;
        jobs.push(streamThrough(workers, i % 2, path, `c${i % CUSTOMERS}-${rig.run}`));
      }
      const results = await Promise.all(jobs);
      await quietStats(bridge);
      const cpuMs = pids.reduce((n, pid, i) => n + processCpuMs(pid) - (cpuBefore[i] ?? 0), 0);
      const mine = /** @type {{ ttfb: number[], cpu: number[], failed: number }} */ (got[rule]);
      mine.cpu.push((cpuMs * 1000) / perSlice);
      for (const r of results) {
        if (r.status === 200) mine.ttfb.push(r.ttfbMs);
        else mine.failed++;
      }
    }
  }
  /** @param {string} c */
  const sum = (c) => {
    const g = /** @type {{ ttfb: number[], cpu: number[], failed: number }} */ (got[c]);
    return {
      streams: g.ttfb.length,
      failed: g.failed,
      ttfbP50: quantile(g.ttfb, 0.5),
      ttfbP99: quantile(g.ttfb, 0.99),
      cpuUsPerStream: median(g.cpu),
      cpuBySlice: g.cpu,
    };
  };
  return { usage: sum("usage"), header: sum("header"), plain: sum("plain") };
}

/**
 * Part 3: billed commands per request, the admission and the settle apart. Each batch: one
 * stream per customer (through both workers in turn), held open HELD_MS; the bridge read once
 * every answer's headers are in and it is quiet (the admissions), again once the bodies ended
 * and it is quiet (the settles). `separated`: no stream had ended at the first read.
 * @param {Rig} rig
 * @param {{ heldBatches: number }} plan
 */
async function billedApart(rig, { heldBatches }) {
  const { workers, bridge, origin, stats } = rig;
  const rows = [];
  for (const rule of ["usage", "plain"]) {
    let admission = 0;
    let settle = 0;
    let requests = 0;
    let separated = true;
    /** @type {Record<string, number>} */
    const admissionBy = {};
    /** @type {Record<string, number>} */
    const settleBy = {};
    /** @param {Record<string, number>} into @param {Record<string, number>} from */
    const add = (into, from) => {
      for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
    };
    for (let b = 0; b < heldBatches; b++) {
      await origin.reset();
      const s0 = await quietStats(bridge);
      const r0 = await stats.snapshot();
      const answers = await Promise.all(
        Array.from({ length: CUSTOMERS }, (_, c) =>
          fetch(`${workers[c % 2]}/${rule}/held?tokens=500&ms=${HELD_MS}`, {
            headers: { "x-customer": `c${c}-${rig.run}` },
          }),
        ),
      );
      const s1 = await quietStats(bridge);
      const r1 = await stats.snapshot();
      const read = now();
      await Promise.all(answers.map((a) => a.arrayBuffer()));
      const s2 = await quietStats(bridge);
      const r2 = await stats.snapshot();
      const ended = (await origin.records()).map((r) => r.end);
      if (answers.some((a) => a.status !== 200) || Math.min(...ended) <= read) separated = false;
      requests += CUSTOMERS;
      admission += s1.billedCommands - s0.billedCommands;
      settle += s2.billedCommands - s1.billedCommands;
      add(admissionBy, stats.perDecision(r0, r1, 1).byCommand);
      add(settleBy, stats.perDecision(r1, r2, 1).byCommand);
    }
    /** @param {Record<string, number>} by */
    const per = (by) =>
      Object.fromEntries(Object.entries(by).map(([k, v]) => [k, v / Math.max(1, requests)]));
    rows.push({
      rule,
      requests,
      admission: admission / requests,
      settle: settle / requests,
      admissionByCommand: per(admissionBy),
      settleByCommand: per(settleBy),
      separated,
    });
  }
  return rows;
}

/**
 * Part 4: long event streams without usage through a third workerd whose V8 heap is capped at
 * HEAP_CAP_MB (its other limits as workerd's), usage rule and plain rule at each length: V8's
 * "heap out of memory" is fatal to workerd, so a stream passing whole says the heap held at most
 * the cap of it (a fifth of 160 MB), not a share that grows with its length.
 * Its resident memory is sampled every 10 ms while each passes: RSS also counts what the heap
 * does not (ArrayBuffers' backing stores, workerd's own buffers, freed memory not given back).
 * @param {{ pid: number, url: string, run: string }} capped
 * @param {{ bigLengths: number[] }} plan
 */
async function bigStreams(capped, { bigLengths }) {
  const { pid } = capped;
  const rss = () => {
    try {
      return rssKbOf(pid);
    } catch {
      return Number.NaN; // the process ended
    }
  };
  const rows = [];
  for (const bytes of bigLengths) {
    for (const rule of ["usage", "plain"]) {
      await delay(200);
      const baseKb = rss();
      let peakKb = baseKb;
      const sampler = setInterval(() => {
        peakKb = Math.max(peakKb, rss());
      }, 10);
      const path = `/${rule}/big?bytes=${bytes}`;
      const r = await streamThrough([capped.url], 0, path, `big-${capped.run}`);
      clearInterval(sampler);
      const afterKb = rss();
      peakKb = Math.max(peakKb, afterKb);
      rows.push({
        rule,
        sent: bytes,
        status: r.status,
        bytes: r.bytes,
        whole: r.status === 200 && r.bytes >= bytes,
        alive: Number.isFinite(afterKb),
        ms: r.totalMs,
        baseKb,
        peakKb,
        growthKb: peakKb - baseKb,
      });
    }
  }
  return rows;
}

/**
 * Part 4, again: the same 40 MB stream through the same capped workerd `times` times in a row,
 * each rule; its resident memory after each over the figure before the first. Whether RSS keeps
 * the memory a stream used or gives it back, and where it levels off.
 * @param {{ pid: number, url: string, run: string }} capped
 * @param {{ bigRepeats: number }} plan
 */
async function repeatedStreams(capped, { bigRepeats }) {
  /** @type {Record<string, number[]>} */
  const after = {};
  for (const rule of ["plain", "usage"]) {
    const base = rssKbOf(capped.pid);
    const kb = [];
    for (let i = 0; i < bigRepeats; i++) {
      const r = await streamThrough(
        [capped.url],
        0,
        `/${rule}/big?bytes=${BIG_BYTES * 4}`,
        `rep-${capped.run}`,
      );
      kb.push(
        r.status === 200 && r.bytes >= BIG_BYTES * 4 ? rssKbOf(capped.pid) - base : Number.NaN,
      );
    }
    after[rule] = kb;
  }
  return after;
}
