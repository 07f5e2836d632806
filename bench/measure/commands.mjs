// @ts-check
// Redis commands per decision: one two-rule limitAll() against two separate limit() calls,
// through the real limiter, the real @upstash/redis client and the project's REST bridge, on a
// private redis-server (INFO commandstats of the shared 6379 would count everyone's traffic).
//
//   node bench/measure/commands.mjs [decisions=200]
//
// Needs redis-server and redis-cli on PATH. The limiter's denial cache is off, so every
// decision reaches the store (the cache's savings are measured in bench/, not here).
import { measureEnv } from "../../tools/measure-env.mjs";

const N = Number(process.argv[2] ?? 200);
const env = await measureEnv();
const { cli, token } = env;
const bridge = /** @type {{ url: string }} */ (env.bridge);
/** @type {any} the bundled src/index.ts */
const lib = await env.bundle(`export * from "./src/index";`);

/** Commands Redis ran (calls per command, scripts' own commands included) while `work` ran. */
async function commandsDuring(/** @type {() => Promise<void>} */ work) {
  cli("CONFIG", "RESETSTAT");
  await work();
  /** @type {Record<string, number>} */
  const counts = {};
  for (const line of cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match?.[1] && !/^(info|config)/.test(match[1])) {
      counts[match[1]] = Number(match[2]);
    }
  }
  return counts;
}

const limiter = lib.createLimiter({
  store: lib.createStoreClient({ url: bridge.url, token, timeoutMs: 5_000 }),
  prefix: "measure",
  denialCache: false,
});
const rules = [
  { policy: "per-second", limit: 8_000, windowMs: 1_000 },
  { policy: "per-hour", limit: 8_000, windowMs: 3_600_000 },
];
/** @param {string} key @param {number} limit */
const requests = (key, limit) => rules.map((rule) => ({ ...rule, key, limit }));

const rows = [];
for (const [label, limit] of /** @type {[string, number][]} */ ([
  ["admitted", 8_000],
  ["denied", 1],
])) {
  // Warm up (script load, and for "denied" fill the 1-unit limits).
  await limiter.limitAll(requests(`warm-${label}`, limit));
  await limiter.limitAll(requests(`one-${label}`, limit));
  for (const r of requests(`two-${label}`, limit)) await limiter.limit(r);

  const one = await commandsDuring(async () => {
    for (let i = 0; i < N; i++) await limiter.limitAll(requests(`one-${label}`, limit));
  });
  const two = await commandsDuring(async () => {
    for (let i = 0; i < N; i++) {
      for (const r of requests(`two-${label}`, limit)) await limiter.limit(r);
    }
  });
  const perDecision = (/** @type {Record<string, number>} */ counts) =>
    Object.fromEntries(Object.entries(counts).map(([name, calls]) => [name, calls / N]));
  const total = (/** @type {Record<string, number>} */ counts) =>
    Object.values(counts).reduce((a, b) => a + b, 0) / N;
  rows.push({
    case: `two sliding-log rules, ${label}`,
    "limitAll: commands": total(one),
    "limitAll: round trips": (one.evalsha ?? 0) / N,
    "2 × limit: commands": total(two),
    "2 × limit: round trips": (two.evalsha ?? 0) / N,
    detailOne: JSON.stringify(perDecision(one)),
    detailTwo: JSON.stringify(perDecision(two)),
  });
}
console.table(rows);

await env.close();
