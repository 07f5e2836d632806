// @ts-check
// Usage rules' settle (docs/usage.md "What it costs"): Redis time per settle call (INFO
// commandstats' usec_per_call of EVALSHA, nothing else run while counting), through the real
// limiter, @upstash/redis and the REST bridge on a private redis-server: a weighted log holding
// N live entries (each request settled just after the others were admitted, newest first), and a
// calendar usage rule (a count and a once-gate).
//
//   node bench/measure/settle-bench.mjs [settles=300]
//
// Needs redis-server and redis-cli on PATH.
import { measureEnv } from "../../tools/measure-env.mjs";

const M = Number(process.argv[2] ?? 300);
const env = await measureEnv();
const { cli, token } = env;
const bridge = /** @type {{ url: string }} */ (env.bridge);
/** @type {any} the bundled library */
const lib = await env.bundle(`export * from "./src/index";`);
const limiter = lib.createLimiter({
  store: lib.createStoreClient({ url: bridge.url, token, timeoutMs: 5_000 }),
  prefix: "measure-settle",
  denialCache: false,
});

/** µs of Redis per EVALSHA while `work` runs (and the calls counted). */
async function evalshaDuring(/** @type {() => Promise<void>} */ work) {
  cli("CONFIG", "RESETSTAT");
  await work();
  const line = cli("INFO", "commandstats")
    .split("\n")
    .find((l) => l.startsWith("cmdstat_evalsha:"));
  const calls = Number(/calls=(\d+)/.exec(line ?? "")?.[1]);
  const usec = Number(/usec_per_call=([\d.]+)/.exec(line ?? "")?.[1]);
  return { calls, usec };
}

const cases = {
  "weighted log, 10 live entries": {
    algorithm: "sliding-log-weighted",
    windowMs: 3_600_000,
    fill: 10,
  },
  "weighted log, 1 000 live entries": {
    algorithm: "sliding-log-weighted",
    windowMs: 3_600_000,
    fill: 1_000,
  },
  "calendar usage rule (month, UTC)": {
    algorithm: "calendar",
    period: { unit: "month", timezone: "UTC" },
    windowMs: 0,
    usage: true,
    fill: 0,
  },
};
const rows = [];
for (const [label, { fill, ...policy }] of Object.entries(cases)) {
  const request = { policy: "p", key: label, limit: 1_000_000_000, cost: 1, ...policy };
  for (let i = 0; i < fill; i++) await limiter.limit(request);
  /** @type {unknown[]} */
  const receipts = [];
  for (let i = 0; i < M; i++) receipts.push((await limiter.limitAll([request])).receipt);
  const settled = await evalshaDuring(async () => {
    for (const receipt of receipts.reverse()) await limiter.settle(receipt, 2);
  });
  const again = await evalshaDuring(async () => {
    for (const receipt of receipts.slice(0, 50)) await limiter.settle(receipt, 2);
  });
  rows.push({
    case: label,
    settles: settled.calls,
    "µs per settle": settled.usec,
    "µs per settle again (409)": again.usec,
  });
}
console.table(rows);
await env.close();
