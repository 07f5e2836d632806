// @ts-check
// Calendar quotas (docs/calendar-quotas.md): Redis commands per decision of a period rule against
// a fixed window, through the real limiter, @upstash/redis and the REST bridge on a private
// redis-server; and the CPU of the period arithmetic per decision (computed, and remembered).
//
//   node scripts/measure-calendar.mjs [decisions=200]
//
// Needs redis-server and redis-cli on PATH. The denial cache is off: every decision reaches the
// store. The CPU figures are Node's V8 on this machine, not workerd's (same engine, same ICU
// data); read them as an order of magnitude.
import { measureEnv } from "./lib/measure-env.mjs";

const N = Number(process.argv[2] ?? 200);
const env = await measureEnv();
const { cli, token } = env;
const bridge = /** @type {{ url: string }} */ (env.bridge);
/** @type {any} the bundled library, and the period arithmetic */
const lib = await env.bundle(
  `export * from "./src/index"; export { periodStarts, startsAround } from "./src/limiter/calendar-period";`,
);

async function commandsDuring(/** @type {() => Promise<void>} */ work) {
  cli("CONFIG", "RESETSTAT");
  await work();
  let calls = 0;
  for (const line of cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim());
    if (match?.[1] && !/^(info|config)/.test(match[1])) calls += Number(match[2]);
  }
  return calls / N;
}

const limiter = lib.createLimiter({
  store: lib.createStoreClient({ url: bridge.url, token, timeoutMs: 5_000 }),
  prefix: "measure-calendar",
  denialCache: false,
});
const month = {
  unit: "month",
  timezone: "Europe/Berlin",
  anchor: Date.parse("2026-01-31T09:00:00+01:00"),
};
const policies = {
  "calendar (month, Europe/Berlin, the 31st)": {
    algorithm: "calendar",
    period: month,
    windowMs: 0,
  },
  "fixed-window (1 day)": { algorithm: "fixed-window", windowMs: 86_400_000 },
};
const rows = [];
for (const [label, policy] of Object.entries(policies)) {
  const row = /** @type {Record<string, unknown>} */ ({ policy: label });
  for (const [outcome, limit] of /** @type {[string, number][]} */ ([
    ["admitted", 100_000],
    ["denied", 1],
  ])) {
    const request = { policy: "p", key: `${label}-${outcome}`, limit, ...policy };
    await limiter.limit(request);
    await limiter.limit(request);
    row[`commands, ${outcome}`] = await commandsDuring(async () => {
      for (let i = 0; i < N; i++) await limiter.limit(request);
    });
  }
  rows.push(row);
}
console.table(rows);

// The arithmetic: four starts around an instant, computed each time, or remembered per period.
const at = Date.parse("2026-03-29T12:00:00Z");
const time = (/** @type {(i: number) => unknown} */ work, runs = 20_000) => {
  for (let i = 0; i < 1_000; i++) work(i);
  const start = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) work(i);
  return Number(process.hrtime.bigint() - start) / runs / 1_000;
};
console.table([
  {
    case: "periodStarts, computed (µs)",
    value: time((i) => lib.periodStarts(month, at + i, 1, 2)),
  },
  { case: "startsAround, remembered (µs)", value: time((i) => lib.startsAround(month, at + i)) },
]);

await env.close();
