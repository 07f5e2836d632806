// @ts-check
// Workerd CPU per decision with analytics on vs off: the worker as deployed
// (wrangler deploy --dry-run), served by workerd alone (as deployed) twice, once with
// "analytics": {"enabled": true} and once without, on a private redis-server behind the REST
// bridge; the same /check load against each, alternated ROUNDS times; CPU = utime + stime of
// that worker's own workerd process (/proc/<pid>/stat, bench/lib/workerd-cpu.mjs) over the
// decisions it answered. Prints the medians and their ratio. Node only.
//
//   node bench/measure-analytics-cpu.mjs [decisions per round, default 3000]
import path from "node:path";
import {
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
  wranglerBundle,
} from "../tools/infra.mjs";
import { withWorkerdCpu } from "./lib/workerd-cpu.mjs";

const DECISIONS = Number(process.argv[2] ?? 3000);
const ROUNDS = 3;
const CONCURRENCY = 8;
const TOKEN = "measure-token";
/** GET /check/stats is an admin route: its own token. */
const ADMIN_TOKEN = "measure-admin-token";

const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
const tmp = tempDir();
const scriptPath = await wranglerBundle(path.join(tmp, "worker"));
/** @param {boolean} analytics */
const config = (analytics) =>
  JSON.stringify({
    prefix: `measure-${analytics ? "on" : "off"}`,
    rules: [{ name: "api", match: { path: "/api/*" }, limit: 20, window: "1m", key: "ip" }],
    ...(analytics ? { analytics: { enabled: true } } : {}),
  });
/** @param {boolean} analytics */
const serve = (analytics) =>
  serveWorker({
    scriptPath,
    bindings: {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
      LIMITER_TOKEN: TOKEN,
      LIMITER_ADMIN_TOKEN: ADMIN_TOKEN,
      LIMITER_CONFIG: config(analytics),
    },
  });

/**
 * DECISIONS /check calls, CONCURRENCY at a time: 100 client keys at limit 20 a minute (rule
 * "api"), so after the first round most are denials (from the denial cache), as in a flood.
 * @param {string} url
 */
async function load(url) {
  let next = 0;
  const worker = async () => {
    while (next < DECISIONS) {
      const i = next++;
      const res = await fetch(`${url}/check`, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
        body: JSON.stringify({ key: `203.0.113.${i % 100}`, rule: "api" }),
      });
      await res.arrayBuffer();
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

const on = await serve(true);
const off = await serve(false);
/** @type {Record<string, number[]>} */
const perDecisionUs = { on: [], off: [] };
try {
  if (on.pid === undefined || off.pid === undefined) throw new Error("no workerd pid found");
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, worker] of /** @type {const} */ ([
      ["off", off],
      ["on", on],
    ])) {
      const { cpuMs } = await withWorkerdCpu(worker.pid, async () => {
        await load(worker.url);
        return { decisions: DECISIONS };
      });
      perDecisionUs[name]?.push((cpuMs * 1000) / DECISIONS);
    }
  }
  const stats = await fetch(`${on.url}/check/stats?minutes=5`, {
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}` },
  }).then((res) => res.json());
  const median = (/** @type {number[]} */ xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? 0;
  const mOn = median(perDecisionUs.on ?? []);
  const mOff = median(perDecisionUs.off ?? []);
  console.log(
    JSON.stringify({ decisionsPerRound: DECISIONS, rounds: ROUNDS, perDecisionUs }, null, 1),
  );
  console.log(
    `workerd CPU per decision: analytics off ${mOff.toFixed(1)} µs, on ${mOn.toFixed(1)} µs (${(mOn / mOff).toFixed(2)}x); the "on" worker counted ${stats.rules?.[0]?.totals?.allowed} allowed + ${stats.rules?.[0]?.totals?.denied} denied, ${stats.isolate?.flushes} flushes`,
  );
} finally {
  await on.dispose();
  await off.dispose();
  await bridge.stop();
  await redis.stop();
}
