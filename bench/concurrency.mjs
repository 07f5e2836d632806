// @ts-check
// Concurrency limits (docs/concurrency.md, design.md "Concurrency limits"): exact across
// isolates, kept busy, released on time, and what a slot costs.
//
//   node bench/concurrency.mjs [--quick]
//   npm run bench -- --only=concurrency [--quick]
//
// The worker built as deployed (wrangler deploy --dry-run) and served by workerd alone, twice: two
// workerd processes (two isolates that share nothing but the store) on one private redis-server
// behind the project's REST bridge. The bridge runs with a command cap far above anything sent
// (BRIDGE_MAX_COMMANDS_PER_SECOND=1000000), because only under a cap does it count the commands
// scripts run inside exactly (bridge/server.mjs, `countedScriptCalls`). The origin is
// tools/slow-origin.mjs, in a process of its own: it counts per key (`x-client`) how many
// requests it has in flight, the most at once and the time spent at each count.
//
// 1. Exact and kept busy: 60 clients on one key, 30 through each worker, rule limit 5; the origin
//    answers after 1 s; a client re-sends as soon as it is answered, and after a 429 (Retry-After:
//    1) waits RETRY_PAUSE_MS, not the second it is told. The origin's most in flight, its share of
//    the time at exactly 5 (measured from MARK_AFTER_MS into the load to its end, while 55
//    clients were always waiting), answers served and 429s.
// 2. Released on time, each trial on a fresh key of a limit-1 rule:
//    (a) A's request through worker 1 (its answer: headers and a first chunk at once, the last
//        chunk 100 ms later); from A's headers on, B sends through worker 2 back to back until
//        admitted. Gap: B's admitted request reaching the origin − A's body ending at A's client.
//    (b) A (node:http, through worker 1) reads the first chunk of a 30 s body and destroys its
//        socket; B as above. Gap: B reaching the origin − A's disconnect.
//    (c) /check on a rule of timeout 2 s through worker 1, never released; /check through worker
//        2 every LAPSE_POLL_MS until admitted. Lapse: that answer − the first one's.
// 3. Cost: billed commands per operation from the bridge's counters (GET /_bridge/stats), each
//    operation sent alone and in sequence (after a warm-up, until the bridge is idle again):
//    acquire + release through the proxy and through /check + /check/release, a full set's
//    denial, beside a plain sliding-log decision through both surfaces.
//
// No assertions: it reports, each figure beside the floor the brief set for it.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
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
import { now, startSlowOrigin } from "../tools/slow-origin.mjs";
import { quietStats } from "./lib/bridge-stats.mjs";
import { LIMITER_TOKEN } from "./lib/load.mjs";
import { outDir, publishAlone } from "./lib/output.mjs";

/** The bridge's cap: never reached, set so that scripts' inner commands are counted exactly. */
const CAP = 1_000_000;
const BUSY_LIMIT = 5;
const BUSY_CLIENTS = 60;
const ORIGIN_MS = 1000;
/** A client's pause after a 429 (told Retry-After: 1). */
const RETRY_PAUSE_MS = 50;
/** The window of the time-weighted share starts this far into the load (past the first burst). */
const MARK_AFTER_MS = 500;
/** 2a: A's answer ends this long after its headers. */
const HANDOFF_BODY_MS = 100;
/**
 * 2b: the rule's timeout, short so that a slot whose release never comes shows as freed at its
 * lapse (≈ this) rather than not at all; B gives up DROP_GIVE_UP_MS after it.
 */
const DROP_TIMEOUT_MS = 5000;
const DROP_GIVE_UP_MS = 2000;
/** 2b: B's pause between attempts (2a sends back to back). */
const DROP_POLL_MS = 10;
/** 2c. */
const LAPSE_TIMEOUT_MS = 2000;
const LAPSE_POLL_MS = 20;
/** The worker's store timeout: far above any wait here, so no decision falls back to the isolate. */
const STORE_TIMEOUT_MS = 2000;

const CONFIG = {
  timeoutMs: STORE_TIMEOUT_MS,
  rules: [
    {
      name: "busy",
      match: { path: "/busy/*" },
      algorithm: "concurrency",
      limit: BUSY_LIMIT,
      timeout: "30s",
      key: "header:x-client",
    },
    {
      name: "handoff",
      match: { path: "/hand/*" },
      algorithm: "concurrency",
      limit: 1,
      timeout: "30s",
      key: "header:x-client",
    },
    {
      name: "drop",
      match: { path: "/drop/*" },
      algorithm: "concurrency",
      limit: 1,
      timeout: `${DROP_TIMEOUT_MS / 1000}s`,
      key: "header:x-client",
    },
    {
      name: "lapse",
      match: { path: "/lapse/*" },
      algorithm: "concurrency",
      limit: 1,
      timeout: `${LAPSE_TIMEOUT_MS / 1000}s`,
      key: "header:x-client",
    },
    {
      name: "slots",
      match: { path: "/slots/*" },
      algorithm: "concurrency",
      limit: 5,
      timeout: "30s",
      key: "header:x-client",
    },
    {
      name: "plain",
      match: { path: "/plain/*" },
      limit: 100_000,
      window: "1m",
      key: "header:x-client",
    },
  ],
};

/** @param {number[]} values @param {number} q */
const quantile = (values, q) => {
  const s = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))] ?? Number.NaN;
};

/** @param {number} value @param {number} [digits] */
const fixed = (value, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : "–");

/**
 * @param {string} url a worker
 * @param {string} route
 * @param {unknown} body
 */
async function postCheck(url, route, body) {
  const res = await fetch(`${url}${route}`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
    body: JSON.stringify(body),
  });
  /** @type {any} */
  const json = await res.json().catch(() => ({}));
  return { status: res.status, body: json };
}

/**
 * One request through the proxy, its body read to the end.
 * @param {string} url
 * @param {string} key
 */
async function proxied(url, key) {
  const res = await fetch(url, { headers: { "x-client": key } });
  await res.arrayBuffer();
  return res;
}

/**
 * The whole section.
 * @param {{ quick?: boolean, progress?: (line: string) => void }} [options]
 */
export async function runConcurrencyBench({
  quick = false,
  progress = (line) => console.log(line),
} = {}) {
  const plan = {
    busySeconds: quick ? 6 : 15,
    busyClients: BUSY_CLIENTS,
    busyLimit: BUSY_LIMIT,
    originMs: ORIGIN_MS,
    retryPauseMs: RETRY_PAUSE_MS,
    markAfterMs: MARK_AFTER_MS,
    handoffTrials: quick ? 15 : 50,
    handoffBodyMs: HANDOFF_BODY_MS,
    dropTrials: quick ? 3 : 10,
    dropTimeoutMs: DROP_TIMEOUT_MS,
    dropGiveUpMs: DROP_GIVE_UP_MS,
    dropPollMs: DROP_POLL_MS,
    lapseTrials: quick ? 2 : 5,
    lapseTimeoutMs: LAPSE_TIMEOUT_MS,
    lapsePollMs: LAPSE_POLL_MS,
    costOps: quick ? 50 : 200,
    bridgeCap: CAP,
    storeTimeoutMs: STORE_TIMEOUT_MS,
  };
  const tmp = tempDir();
  /** @type {(() => Promise<void>)[]} */
  const cleanups = [];
  const started = Date.now();
  const run = Date.now().toString(36);
  try {
    progress("building the worker with wrangler deploy --dry-run");
    const bundle = await wranglerBundle(path.join(tmp, "ours"));
    progress(`starting a private redis-server, the bridge (cap ${CAP}/s) and the slow origin`);
    const redis = await startPrivateRedis();
    cleanups.push(redis.stop);
    const bridge = await startBridgeProcess(redis.url, { maxCommandsPerSecond: CAP });
    cleanups.push(bridge.stop);
    const origin = await startSlowOrigin();
    cleanups.push(origin.stop);
    const bindings = {
      LIMITER_TOKEN,
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
      ORIGIN_URL: origin.url,
      LIMITER_CONFIG: JSON.stringify(CONFIG),
    };
    progress("serving it twice, each in its own workerd process");
    /** @type {string[]} */
    const workers = [];
    for (let i = 0; i < 2; i++) {
      const served = await serveWorker({ scriptPath: bundle, bindings });
      cleanups.push(served.dispose);
      workers.push(served.url);
    }
    const [w1, w2] = /** @type {[string, string]} */ (workers);
    // Warm both isolates (and load the scripts) before anything is measured.
    for (const w of workers) {
      await proxied(`${w}/slots/warm`, `warm-${run}`);
      await proxied(`${w}/plain/warm`, `warm-${run}`);
    }

    progress(
      `1. ${BUSY_CLIENTS} clients on one key, limit ${BUSY_LIMIT}, origin ${ORIGIN_MS} ms, ${plan.busySeconds} s`,
    );
    const busy = await busyLoad({ workers, origin, bridge, plan, key: `busy-${run}` });
    progress(
      `   max in flight ${busy.max}, at exactly ${BUSY_LIMIT} ${(busy.shareAtLimit * 100).toFixed(1)} % ` +
        `of ${fixed(busy.windowMs / 1000, 1)} s, served ${busy.served}, 429s ${busy.denied}`,
    );

    progress(`2a. hand-off to the other worker, ${plan.handoffTrials} trials`);
    const handoff = await handoffTrials({ w1, w2, origin, plan, run });
    progress(
      `   p50 ${fixed(handoff.p50, 1)} ms, p90 ${fixed(handoff.p90, 1)} ms, max ${fixed(handoff.max, 1)} ms`,
    );

    progress(`2b. a client that goes away mid-body, ${plan.dropTrials} trials`);
    const drop = await dropTrials({ w1, w2, origin, plan, run });
    progress(
      `   p50 ${fixed(drop.p50, 1)} ms, max ${fixed(drop.max, 1)} ms, freed ${drop.freed}/${drop.trials.length}`,
    );

    progress(`2c. a /check slot never released, timeout ${LAPSE_TIMEOUT_MS} ms`);
    const lapse = await lapseTrials({ w1, w2, plan, run });
    progress(
      `   lapse ${lapse.trials.map((t) => fixed(t.lapseMs)).join(", ")} ms (timeout ${LAPSE_TIMEOUT_MS})`,
    );

    progress(`3. billed commands per operation, ${plan.costOps} of each`);
    const cost = await costRows({ w1, w2, bridge, plan, run });
    for (const row of cost) {
      progress(
        `   ${row.name}: ${fixed(row.billedPerOp, 2)} billed, ${fixed(row.callsPerOp, 2)} calls`,
      );
    }

    return {
      date: new Date().toISOString(),
      machine: { node: process.version, cpus: cpus().length },
      plan,
      config: CONFIG,
      busy,
      handoff,
      drop,
      lapse,
      cost,
      seconds: (Date.now() - started) / 1000,
    };
  } finally {
    for (const fn of cleanups.reverse()) await fn().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Part 1.
 * @param {{ workers: string[], origin: Awaited<ReturnType<typeof startSlowOrigin>>,
 *   bridge: { url: string, token: string }, plan: { busySeconds: number }, key: string }} o
 */
async function busyLoad({ workers, origin, bridge, plan, key }) {
  const before = await quietStats(bridge);
  const start = now();
  const stopAt = start + plan.busySeconds * 1000;
  const perWorker = workers.map(() => ({ served: 0, denied: 0 }));
  let served = 0;
  let denied = 0;
  /** @type {Record<string, number>} */
  const other = {};
  /** @type {Record<string, number>} */
  const retryAfter = {};
  const clients = Array.from({ length: BUSY_CLIENTS }, async (_, i) => {
    const w = i % workers.length;
    const counts = /** @type {{ served: number, denied: number }} */ (perWorker[w]);
    while (now() < stopAt) {
      let status = 0;
      try {
        const res = await proxied(`${workers[w]}/busy/c${i}?delay=${ORIGIN_MS}`, key);
        status = res.status;
        if (status === 429) {
          const ra = res.headers.get("retry-after") ?? "none";
          retryAfter[ra] = (retryAfter[ra] ?? 0) + 1;
        }
      } catch {
        status = 0;
      }
      if (status === 200) {
        served++;
        counts.served++;
      } else if (status === 429) {
        denied++;
        counts.denied++;
        await delay(RETRY_PAUSE_MS);
      } else {
        other[String(status)] = (other[String(status)] ?? 0) + 1;
        await delay(RETRY_PAUSE_MS);
      }
    }
  });
  await delay(MARK_AFTER_MS);
  await origin.mark(key);
  await delay(Math.max(0, stopAt - now()));
  // The window ends as the load does, while every client is still waiting or in flight.
  const window = await origin.stats(key);
  await Promise.all(clients);
  const after = await quietStats(bridge);
  const final = await origin.stats(key);
  const timeAt = window.timeAt;
  const share = (/** @type {number} */ n) => (timeAt[String(n)] ?? 0) / window.windowMs;
  const billed = after.billedCommands - before.billedCommands;
  return {
    seconds: (now() - start) / 1000,
    max: final.max,
    windowMax: window.windowMax,
    windowMs: window.windowMs,
    shareAtLimit: share(BUSY_LIMIT),
    shareByCount: Object.fromEntries(
      Object.keys(timeAt)
        .sort((a, b) => Number(a) - Number(b))
        .map((n) => [n, share(Number(n))]),
    ),
    served,
    denied,
    other,
    retryAfter,
    perWorker,
    originServed: final.served,
    originAborted: final.aborted,
    /** What a limit of 5 allows in the load's time, each answer taking ORIGIN_MS. */
    ceiling: (BUSY_LIMIT * plan.busySeconds * 1000) / ORIGIN_MS,
    billedCommands: billed,
    scriptCalls: after.scriptCalls - before.scriptCalls,
  };
}

/**
 * B through `url` until admitted (or `until`), `pauseMs` between attempts; the time each attempt
 * was sent and answered.
 * @param {string} url
 * @param {string} key
 * @param {number} until
 * @param {number} [pauseMs]
 */
async function sendUntilAdmitted(url, key, until, pauseMs = 0) {
  /** @type {{ sent: number, answered: number, status: number }[]} */
  const attempts = [];
  while (now() < until) {
    const sent = now();
    let status = 0;
    try {
      status = (await proxied(url, key)).status;
    } catch {
      status = 0;
    }
    attempts.push({ sent, answered: now(), status });
    if (status === 200) break;
    if (pauseMs > 0) await delay(pauseMs);
  }
  return attempts;
}

/** @param {number[]} gaps */
const summary = (gaps) => ({
  p50: quantile(gaps, 0.5),
  p90: quantile(gaps, 0.9),
  min: quantile(gaps, 0),
  max: quantile(gaps, 1),
});

/**
 * Part 2a.
 * @param {{ w1: string, w2: string, origin: Awaited<ReturnType<typeof startSlowOrigin>>,
 *   plan: { handoffTrials: number }, run: string }} o
 */
async function handoffTrials({ w1, w2, origin, plan, run }) {
  /** @type {{ gapMs: number, sentGapMs: number, deniedAfterEnd: number, denied: number, status: number }[]} */
  const trials = [];
  for (let i = 0; i < plan.handoffTrials; i++) {
    const key = `handoff-${run}-${i}`;
    const a = await fetch(`${w1}/hand/a?chunks=2&every=${HANDOFF_BODY_MS}`, {
      headers: { "x-client": key },
    });
    if (a.status !== 200) {
      await a.arrayBuffer();
      trials.push({
        gapMs: Number.NaN,
        sentGapMs: Number.NaN,
        deniedAfterEnd: 0,
        denied: 0,
        status: a.status,
      });
      continue;
    }
    // A holds the slot: B starts now, through the other worker.
    const b = sendUntilAdmitted(`${w2}/hand/b`, key, now() + 5000);
    await a.arrayBuffer();
    const aEnd = now();
    const attempts = await b;
    const admitted = attempts.at(-1);
    const stats = await origin.stats(key);
    const bArrival = stats.arrivals[1] ?? Number.NaN;
    trials.push({
      gapMs: admitted?.status === 200 ? bArrival - aEnd : Number.NaN,
      sentGapMs: admitted?.status === 200 ? admitted.sent - aEnd : Number.NaN,
      deniedAfterEnd: attempts.filter((t) => t.status === 429 && t.answered > aEnd).length,
      denied: attempts.filter((t) => t.status === 429).length,
      status: admitted?.status ?? 0,
    });
    await delay(20);
  }
  const gaps = trials.map((t) => t.gapMs);
  return {
    ...summary(gaps),
    admitted: gaps.filter((g) => Number.isFinite(g)).length,
    earlyAdmissions: gaps.filter((g) => g < 0).length,
    medianDeniedAfterEnd: quantile(
      trials.map((t) => t.deniedAfterEnd),
      0.5,
    ),
    trials,
  };
}

/**
 * A's request through `url` with node:http; resolves when its first chunk has come and its
 * socket has been destroyed, with that moment.
 * @param {string} url
 * @param {string} key
 * @returns {Promise<{ status: number, at: number }>}
 */
function readFirstChunkAndGo(url, key) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { "x-client": key }, agent: false }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        res.once("end", () => resolve({ status: res.statusCode ?? 0, at: now() }));
        return;
      }
      res.once("data", () => {
        const at = now();
        req.destroy();
        resolve({ status: 200, at });
      });
    });
    req.once("error", (error) => {
      // Our own destroy() after the first chunk is not a failure.
      if (!req.destroyed) reject(error);
    });
  });
}

/**
 * Part 2b.
 * @param {{ w1: string, w2: string, origin: Awaited<ReturnType<typeof startSlowOrigin>>,
 *   plan: { dropTrials: number }, run: string }} o
 */
async function dropTrials({ w1, w2, origin, plan, run }) {
  /** @type {{ freeMs: number, originClosedMs: number, denied: number, status: number }[]} */
  const trials = [];
  for (let i = 0; i < plan.dropTrials; i++) {
    const key = `drop-${run}-${i}`;
    // 30 s of body, a chunk every 50 ms.
    const a = await readFirstChunkAndGo(`${w1}/drop/a?chunks=600&every=50`, key);
    if (a.status !== 200) {
      trials.push({ freeMs: Number.NaN, originClosedMs: Number.NaN, denied: 0, status: a.status });
      continue;
    }
    const attempts = await sendUntilAdmitted(
      `${w2}/drop/b`,
      key,
      a.at + DROP_TIMEOUT_MS + DROP_GIVE_UP_MS,
      DROP_POLL_MS,
    );
    const admitted = attempts.at(-1);
    const stats = await origin.stats(key);
    trials.push({
      freeMs:
        admitted?.status === 200
          ? (stats.arrivals[1] ?? Number.NaN) - a.at
          : Number.POSITIVE_INFINITY,
      originClosedMs: (stats.aborts[0] ?? Number.NaN) - a.at,
      denied: attempts.filter((t) => t.status === 429).length,
      status: admitted?.status ?? 0,
    });
  }
  const free = trials.map((t) => t.freeMs);
  return {
    ...summary(free),
    freed: free.filter((f) => Number.isFinite(f)).length,
    freedWithinSecond: free.filter((f) => f <= 1000).length,
    /** Freed no sooner than a second before the rule's timeout: the release never came, the slot lapsed. */
    lapsedAtTimeout: free.filter((f) => Number.isFinite(f) && f >= DROP_TIMEOUT_MS - 1000).length,
    originClosedP50: quantile(
      trials.map((t) => t.originClosedMs),
      0.5,
    ),
    trials,
  };
}

/**
 * Part 2c.
 * @param {{ w1: string, w2: string, plan: { lapseTrials: number }, run: string }} o
 */
async function lapseTrials({ w1, w2, plan, run }) {
  /** @type {{ lapseMs: number, afterExpiresMs: number, polls: number, status: number }[]} */
  const trials = [];
  for (let i = 0; i < plan.lapseTrials; i++) {
    const key = `lapse-${run}-${i}`;
    const first = await postCheck(w1, "/check", { rule: "lapse", key });
    const taken = now();
    if (first.status !== 200 || typeof first.body.expires !== "number") {
      trials.push({
        lapseMs: Number.NaN,
        afterExpiresMs: Number.NaN,
        polls: 0,
        status: first.status,
      });
      continue;
    }
    let polls = 0;
    let status = 0;
    let admittedAt = Number.NaN;
    while (now() < taken + LAPSE_TIMEOUT_MS + 5000) {
      const next = await postCheck(w2, "/check", { rule: "lapse", key });
      polls++;
      status = next.status;
      if (status === 200) {
        admittedAt = now();
        await postCheck(w2, "/check/release", { rule: "lapse", key, slot: next.body.slot });
        break;
      }
      await delay(LAPSE_POLL_MS);
    }
    trials.push({
      lapseMs: admittedAt - taken,
      afterExpiresMs: admittedAt - first.body.expires,
      polls,
      status,
    });
  }
  const lapses = trials.map((t) => t.lapseMs);
  return {
    ...summary(lapses),
    worstOffMs: Math.max(...lapses.map((l) => Math.abs(l - LAPSE_TIMEOUT_MS))),
    trials,
  };
}

/**
 * Part 3: billed commands per operation, each measured alone.
 * @param {{ w1: string, w2: string, bridge: { url: string, token: string },
 *   plan: { costOps: number }, run: string }} o
 */
async function costRows({ w1, w2, bridge, plan, run }) {
  const ws = [w1, w2];
  // Each row its own fresh key (the denials' rows share one full set): a sliding log's bill
  // depends on how full its key's log is, so both plain rows start from an empty one.
  const fullKey = `cost-full-${run}`;
  // A full set for the denials: its one slot taken through /check and never released (30 s).
  const held = await postCheck(w1, "/check", { rule: "handoff", key: fullKey });
  if (held.status !== 200) throw new Error(`could not fill the set: ${held.status}`);
  /** @type {{ id: string, name: string, expected: number, op: (i: number) => Promise<boolean> }[]} */
  const ops = [
    {
      id: "proxy-slot",
      name: "proxy: acquire + release (concurrency rule)",
      expected: 10,
      op: async (i) => (await proxied(`${ws[i % 2]}/slots/x`, `proxy-slot-${run}`)).status === 200,
    },
    {
      id: "proxy-plain",
      name: "proxy: sliding-log admission (plain rate rule)",
      expected: 4,
      op: async (i) => (await proxied(`${ws[i % 2]}/plain/x`, `proxy-plain-${run}`)).status === 200,
    },
    {
      id: "proxy-full",
      name: "proxy: a full set's denial",
      expected: 4,
      op: async (i) => (await proxied(`${ws[i % 2]}/hand/x`, fullKey)).status === 429,
    },
    {
      id: "check-slot",
      name: "/check + /check/release (concurrency rule)",
      expected: 10,
      op: async (i) => {
        const w = /** @type {string} */ (ws[i % 2]);
        const key = `check-slot-${run}`;
        const got = await postCheck(w, "/check", { rule: "slots", key });
        if (got.status !== 200) return false;
        const back = await postCheck(w, "/check/release", {
          rule: "slots",
          key,
          slot: got.body.slot,
        });
        return back.status === 200;
      },
    },
    {
      id: "check-plain",
      name: "/check: sliding-log admission (plain rate rule)",
      expected: 4,
      op: async (i) =>
        (
          await postCheck(/** @type {string} */ (ws[i % 2]), "/check", {
            rule: "plain",
            key: `check-plain-${run}`,
          })
        ).status === 200,
    },
    {
      id: "check-full",
      name: "/check: a full set's denial",
      expected: 4,
      op: async (i) =>
        (
          await postCheck(/** @type {string} */ (ws[i % 2]), "/check", {
            rule: "handoff",
            key: fullKey,
          })
        ).status === 429,
    },
  ];
  const rows = [];
  for (const { id, name, expected, op } of ops) {
    for (let i = 0; i < 4; i++) await op(i);
    const before = await quietStats(bridge);
    let ok = 0;
    for (let i = 0; i < plan.costOps; i++) if (await op(i)) ok++;
    const after = await quietStats(bridge);
    const billed = after.billedCommands - before.billedCommands;
    const calls = after.scriptCalls - before.scriptCalls;
    rows.push({
      id,
      name,
      ops: plan.costOps,
      asExpected: ok,
      billed,
      billedPerOp: billed / plan.costOps,
      callsPerOp: calls / plan.costOps,
      requestsPerOp: (after.requests - before.requests) / plan.costOps,
      countedExactly: after.countedScriptCalls - before.countedScriptCalls === calls,
      documented: expected,
    });
  }
  const plainProxy = rows.find((r) => r.id === "proxy-plain")?.billedPerOp ?? Number.NaN;
  const plainCheck = rows.find((r) => r.id === "check-plain")?.billedPerOp ?? Number.NaN;
  return rows.map((r) => ({
    ...r,
    timesPlain: r.billedPerOp / (r.id.startsWith("proxy") ? plainProxy : plainCheck),
  }));
}

/** @typedef {Awaited<ReturnType<typeof runConcurrencyBench>> & { command?: string }} ConcurrencyResults */

/** @param {boolean} met */
const verdict = (met) => (met ? "met" : "**NOT met**");

/**
 * The section as markdown (no heading of its own but the subsections).
 * @param {ConcurrencyResults} r
 */
export function concurrencyMarkdown(r) {
  const { plan, busy, handoff, drop, lapse, cost } = r;
  const pct = (/** @type {number} */ v) => `${fixed(v * 100, 1)} %`;
  const lines = [
    "The worker as deployed (`wrangler deploy --dry-run`) served by workerd alone, twice (two workerd " +
      "processes, two isolates sharing nothing but the store), on one private redis-server behind the " +
      `REST bridge (capped at ${plan.bridgeCap} commands/s, never reached: the cap makes it count scripts' ` +
      "inner commands exactly). The origin (`tools/slow-origin.mjs`, its own process) counts per key " +
      `what it has in flight. Store timeout ${plan.storeTimeoutMs} ms. Rules: \`${JSON.stringify(r.config.rules)}\`.`,
    "",
    "| measure | figure | floor | |",
    "| --- | --- | --- | --- |",
    `| 1. most in flight at the origin, one key, limit ${plan.busyLimit} | ${busy.max} | never > ${plan.busyLimit} | ${verdict(busy.max <= plan.busyLimit)} |`,
    `| 1. share of the time exactly ${plan.busyLimit} in flight, clients waiting | ${pct(busy.shareAtLimit)} | ≥ 90 % | ${verdict(busy.shareAtLimit >= 0.9)} |`,
    `| 2a. slot free for the other worker after a response ends, p50 / p90 | ${fixed(handoff.p50, 1)} / ${fixed(handoff.p90, 1)} ms | p50 ≤ 50 ms | ${verdict(handoff.p50 <= 50)} |`,
    `| 2b. slot free after the client went away mid-body, p50 / max | ${fixed(drop.p50, 0)} / ${fixed(drop.max, 0)} ms (${drop.freed}/${drop.trials.length} freed) | ≤ 1 s | ${verdict(drop.trials.length > 0 && drop.freedWithinSecond === drop.trials.length)} |`,
    `| 2c. an unreleased /check slot lapses, min / max (timeout ${plan.lapseTimeoutMs} ms) | ${fixed(lapse.min, 0)} / ${fixed(lapse.max, 0)} ms | timeout ± 1 s | ${verdict(lapse.worstOffMs <= 1000)} |`,
    `| 3. billed commands, proxy acquire + release / sliding-log admission | ${fixed(cost.find((c) => c.id === "proxy-slot")?.billedPerOp ?? Number.NaN, 2)} / ${fixed(cost.find((c) => c.id === "proxy-plain")?.billedPerOp ?? Number.NaN, 2)} | (reported) | |`,
    "",
    `### 1. Exact and kept busy`,
    "",
    `${plan.busyClients} clients on one key, ${plan.busyClients / 2} through each worker, limit ${plan.busyLimit}; ` +
      `the origin answers after ${plan.originMs} ms; each client re-sends as soon as it is answered, and ` +
      `after a 429 (\`Retry-After: 1\`) waits ${plan.retryPauseMs} ms, not the second it is told ` +
      `(so a freed slot is taken within about ${plan.retryPauseMs} ms by one of the waiting clients). ` +
      `${fixed(busy.seconds, 1)} s of load; the time-weighted share is over the last ` +
      `${fixed(busy.windowMs / 1000, 1)} s (from ${plan.markAfterMs} ms in to the end of the load, ` +
      `${plan.busyClients - plan.busyLimit} or more clients waiting throughout).`,
    "",
    "| | |",
    "| --- | --- |",
    `| most in flight at the origin (whole run / window) | ${busy.max} / ${busy.windowMax} |`,
    `| share of the window at each count in flight | ${Object.entries(busy.shareByCount)
      .map(([n, s]) => `${n}: ${pct(s)}`)
      .join(", ")} |`,
    `| answered 200 (origin served) | ${busy.served} (${busy.originServed}; ceiling ${fixed(busy.ceiling)} = ${plan.busyLimit} × ${fixed(busy.seconds, 0)} s ÷ ${plan.originMs / 1000} s) |`,
    `| 429s | ${busy.denied} (Retry-After: ${Object.entries(busy.retryAfter)
      .map(([v, n]) => `${v} × ${n}`)
      .join(", ")}) |`,
    `| other answers | ${
      Object.entries(busy.other)
        .map(([s, n]) => `${s} × ${n}`)
        .join(", ") || "none"
    } |`,
    `| per worker, 200 / 429 | ${busy.perWorker.map((w) => `${w.served} / ${w.denied}`).join("; ")} |`,
    `| billed commands during the load, and per 200 | ${busy.billedCommands}, ${fixed(busy.billedCommands / busy.served, 1)} (${busy.scriptCalls} store calls; 10 a 200 and 4 a 429, as documented, would be ${busy.served * 10 + busy.denied * 4}) |`,
    "",
    "### 2. Released on time",
    "",
    `(a) ${plan.handoffTrials} trials, each on a fresh key of a limit-1 rule: A through worker 1 ` +
      `(the origin sends the headers and a first chunk at once, the last chunk ${plan.handoffBodyMs} ms later); ` +
      "from A's headers on, B sends through worker 2 back to back (no pause) until admitted. Gap: B's " +
      "admitted request reaching the origin − A's body ending at A's client.",
    "",
    `p50 ${fixed(handoff.p50, 1)} ms, p90 ${fixed(handoff.p90, 1)} ms, min ${fixed(handoff.min, 1)}, ` +
      `max ${fixed(handoff.max, 1)} ms; admitted ${handoff.admitted}/${handoff.trials.length}; ` +
      `B admitted before A's end: ${handoff.earlyAdmissions}; median 429s B got after A's end: ${fixed(handoff.medianDeniedAfterEnd)}.`,
    "",
    `(b) ${plan.dropTrials} trials, each on a fresh key of a limit-1 rule with \`timeout: "${plan.dropTimeoutMs / 1000}s"\` ` +
      "(short, so that a slot whose release never comes shows up as freed at its lapse): A (node:http, " +
      "through worker 1) reads the first chunk of a 30 s body (a chunk every 50 ms) and destroys its socket; " +
      `B sends through worker 2 every ${plan.dropPollMs} ms until admitted (giving up ${plan.dropGiveUpMs} ms past the timeout). ` +
      "Free: B's admitted request reaching the origin − A's disconnect.",
    "",
    `p50 ${fixed(drop.p50, 0)} ms, p90 ${fixed(drop.p90, 0)} ms, min ${fixed(drop.min, 0)}, max ${fixed(drop.max, 0)} ms; ` +
      `freed ${drop.freed}/${drop.trials.length}, within 1 s ${drop.freedWithinSecond}, at the rule's timeout ` +
      `(no release, the slot lapsed) ${drop.lapsedAtTimeout} (per trial: ${drop.trials.map((t) => fixed(t.freeMs, 0)).join(", ")} ms). ` +
      `The origin's connection was closed by the worker p50 ${fixed(drop.originClosedP50, 0)} ms after A's disconnect.`,
    ...(drop.lapsedAtTimeout > 0
      ? [
          "",
          "Why, as far as this run shows: workerd notices the client is gone (it closes the origin " +
            "fetch within tens of ms) but never calls the `cancel` of the stream the proxy wraps the body " +
            "in (src/http/release-at-end.ts `releasingAtEnd`), nor settles its pending `pull`: the request's " +
            "context is torn down, so its release callback never runs and no release reaches the store (a MONITOR " +
            "on the redis-server shows no release script after the disconnect). The slot is freed only " +
            "when it lapses at the rule's timeout. In-process tests (`reader.cancel()` on the Response) " +
            "do reach `cancel`; a real HTTP client's disconnect through workerd does not. A `ctx.waitUntil` " +
            "registered before the disconnect does keep running after it (checked with a bare worker), " +
            "so a release hook has to be one that settles without the stream's `cancel`.",
        ]
      : []),
    "",
    `(c) ${plan.lapseTrials} trials: /check on a rule with \`timeout: "${plan.lapseTimeoutMs / 1000}s"\` through ` +
      `worker 1, never released; /check through worker 2 every ${plan.lapsePollMs} ms until admitted. ` +
      `Lapse: that answer − the first: ${lapse.trials.map((t) => fixed(t.lapseMs, 0)).join(", ")} ms ` +
      `(after the \`expires\` the first answer named: ${lapse.trials.map((t) => fixed(t.afterExpiresMs, 0)).join(", ")} ms); ` +
      `worst ${fixed(lapse.worstOffMs, 0)} ms off the timeout.`,
    "",
    "### 3. Cost",
    "",
    `Billed commands per operation from the bridge's counters, ${plan.costOps} of each sent one after ` +
      "another alternating the two workers, after a warm-up, counted until the bridge is idle (the proxy's " +
      'release runs after the response). Documented: docs/concurrency.md "How it counts".',
    "",
    "| operation | billed / op | × the plain rate decision | store calls / op | bridge requests / op | documented | answered as expected | inner commands counted exactly |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...cost.map(
      (c) =>
        `| ${c.name} | ${fixed(c.billedPerOp, 2)} | ${fixed(c.timesPlain, 2)} | ${fixed(c.callsPerOp, 2)} | ` +
        `${fixed(c.requestsPerOp, 2)} | ${c.documented} | ${c.asExpected}/${c.ops} | ${c.countedExactly ? "yes" : "no"} |`,
    ),
    "",
  ];
  return lines.join("\n");
}

/**
 * bench/out/concurrency.md and .json (bench/out/quick/ with --quick), and its block of the report
 * (bench/lib/output.mjs).
 * @param {ConcurrencyResults} results
 * @param {string} command
 * @param {boolean} quick
 */
export function writeConcurrencyOutput(results, command, quick) {
  const out = outDir(quick);
  mkdirSync(out, { recursive: true });
  const named = { command, ...results };
  const json = path.join(out, "concurrency.json");
  writeFileSync(json, `${JSON.stringify(named, null, 2)}\n`);
  const head =
    `\`${command}\`, ${named.date}, Node ${named.machine.node}, ` +
    `${named.machine.cpus} cores, ${fixed(named.seconds)} s.\n\n`;
  const md = concurrencyMarkdown(named);
  writeFileSync(
    path.join(out, "concurrency.md"),
    `# edge-limiter concurrency benchmark\n\n${head}${md}`,
  );
  console.log(`\n${md}\nwritten: ${path.relative(ROOT, path.join(out, "concurrency.md"))}`);
  console.log(`written: ${publishAlone(quick, "concurrency")}`);
}

async function main() {
  const argv = process.argv.slice(2);
  const quick = argv.includes("--quick");
  const started = Date.now();
  /** @param {string} line */
  const progress = (line) =>
    console.log(`[concurrency ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${line}`);
  const results = await runConcurrencyBench({ quick, progress });
  writeConcurrencyOutput(results, ["node bench/concurrency.mjs", ...argv].join(" "), quick);
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main();
  process.exit(0);
}
