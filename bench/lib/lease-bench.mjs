// @ts-check
// Leases with a distant store (docs/leases.md): one hot key asked at a steady rate
// through /check, the store behind a proxy that adds 20 ms before every request (a cross-region
// Upstash). Figures per contender: p50/p99 latency of the allowed decisions, and store round
// trips (HTTP requests the proxy saw, lease calls and give-backs included) per 1000 allowed
// decisions. Contenders: our worker with `"lease": true` in the body, the same worker without
// it, and the anchor (@upstash/ratelimit slidingWindow behind the same /check code). Alternated,
// repeated, medians.
// @ts-expect-error autocannon ships no types
import autocannon from "autocannon";
import { delay, serveWorker } from "../../tools/infra.mjs";
import { startLatencyProxy } from "../../tools/latency-proxy.mjs";
import { LIMITER_TOKEN } from "./load.mjs";

/** What one run asks: one key, far under its limit (every decision allowed). */
const HOT = { limit: 100_000, window: "1h" };

/**
 * @typedef {object} LeaseRun
 * @property {number} allowed 200s
 * @property {number} other every other answer (429, errors, timeouts)
 * @property {number} denied 429s
 * @property {number} p50 ms
 * @property {number} p99 ms
 * @property {number} roundTrips store requests during the run and the lease ends after it
 * @property {number} perThousand store round trips per 1000 allowed decisions
 */

/**
 * @param {{ url: string, proxy: Awaited<ReturnType<typeof startLatencyProxy>>, body: object, seconds: number, rate: number, connections: number }} options
 * @returns {Promise<LeaseRun>}
 */
async function hotKeyRun({ url, proxy, body, seconds, rate, connections }) {
  /** @param {number} duration */
  const load = (duration) =>
    autocannon({
      url: `${url}/check`,
      connections,
      duration,
      overallRate: rate,
      timeout: 30,
      requests: [
        {
          method: "POST",
          path: "/check",
          headers: {
            "content-type": "application/json",
            authorization: `Bearer ${LIMITER_TOKEN}`,
          },
          body: JSON.stringify(body),
        },
      ],
    });
  // A hot key is one already asked for: a second of the same load first (the key's first
  // decisions, its first lease, the scripts loaded), not measured.
  await load(1);
  proxy.reset();
  const result = await load(seconds);
  // The last leases end (and give back their unspent units) within a lifetime (1 s) after the
  // load stops: count those round trips too.
  await delay(1_500);
  const codes = /** @type {Record<string, { count: number }>} */ (result.statusCodeStats ?? {});
  const allowed = Number(codes["200"]?.count ?? 0);
  const total = Object.values(codes).reduce((sum, c) => sum + Number(c.count), 0);
  const roundTrips = proxy.counts.requests;
  return {
    allowed,
    other: total - allowed + result.errors + result.timeouts,
    p50: result.latency.p50,
    p99: result.latency.p99,
    denied: Number(codes["429"]?.count ?? 0),
    roundTrips,
    perThousand: allowed > 0 ? (roundTrips / allowed) * 1000 : Number.NaN,
  };
}

/** @param {number[]} values */
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2
    ? (sorted[mid] ?? Number.NaN)
    : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

/**
 * @param {{ bridge: { url: string, token: string }, bundles: { ours: string, anchor: string }, delayMs?: number, seconds: number, repeats: number, rate: number, connections?: number, progress?: (message: string) => void }} options
 */
export async function runLeaseBench({
  bridge,
  bundles,
  delayMs = 20,
  seconds,
  repeats,
  rate,
  connections = 16,
  progress = () => {},
}) {
  const proxy = await startLatencyProxy(bridge.url, delayMs);
  const bindings = {
    UPSTASH_REDIS_REST_URL: proxy.url,
    UPSTASH_REDIS_REST_TOKEN: bridge.token,
    LIMITER_TOKEN,
  };
  const ours = await serveWorker({
    scriptPath: bundles.ours,
    bindings: {
      ...bindings,
      LIMITER_CONFIG: JSON.stringify({ rules: [], timeoutMs: 2_000, failMode: "open" }),
    },
  });
  const anchor = await serveWorker({ scriptPath: bundles.anchor, bindings });
  const tag = `lease-${Date.now()}`;
  /** @type {Record<string, { url: string, body: (n: number) => object }>} */
  const contenders = {
    leasesOn: { url: ours.url, body: (n) => ({ key: `${tag}:on:${n}`, ...HOT, lease: true }) },
    leasesOff: { url: ours.url, body: (n) => ({ key: `${tag}:off:${n}`, ...HOT }) },
    anchor: { url: anchor.url, body: (n) => ({ key: `${tag}:anchor:${n}`, ...HOT }) },
    // The floor: the same worker and route answering with no store call at all (a key over its
    // limit of 1, denied from the denial cache). Added latency is a contender's minus this.
    floor: { url: ours.url, body: (n) => ({ key: `${tag}:floor:${n}`, limit: 1, window: "1h" }) },
  };
  /** @type {Record<string, LeaseRun[]>} */
  const runs = { leasesOn: [], leasesOff: [], anchor: [], floor: [] };
  try {
    for (let round = 0; round < repeats; round++) {
      for (const [name, contender] of Object.entries(contenders)) {
        const run = await hotKeyRun({
          url: contender.url,
          proxy,
          body: contender.body(round),
          seconds,
          rate,
          connections,
        });
        runs[name]?.push(run);
        progress(
          `leases (${delayMs} ms store) ${name}: p50 ${run.p50} ms, p99 ${run.p99} ms, ` +
            `${run.perThousand.toFixed(1)} round trips / 1000 allowed (${run.allowed} allowed, ${run.other} other)`,
        );
      }
    }
  } finally {
    await ours.dispose();
    await anchor.dispose();
    await proxy.close();
  }
  const floorP50 = median(runs.floor?.map((r) => r.p50) ?? []);
  const summary = Object.fromEntries(
    Object.entries(runs).map(([name, list]) => {
      const p50 = median(list.map((r) => r.p50));
      return [
        name,
        {
          p50,
          addedP50: p50 - floorP50,
          p99: median(list.map((r) => r.p99)),
          perThousand: median(list.map((r) => r.perThousand)),
          allowed: median(list.map((r) => r.allowed)),
          other: list.reduce((sum, r) => sum + r.other, 0),
        },
      ];
    }),
  );
  return { delayMs, seconds, repeats, rate, connections, hot: HOT, runs, summary };
}

/**
 * The section for bench/results.md.
 * @param {Awaited<ReturnType<typeof runLeaseBench>>} lease
 */
export function leaseMarkdown(lease) {
  const { summary } = lease;
  /** @param {string} name @param {string} label */
  const row = (name, label) => {
    const s = summary[name];
    if (!s) return "";
    const trips = Number.isFinite(s.perThousand) ? s.perThousand.toFixed(1) : "–";
    return `| ${label} | ${s.p50} ms | ${name === "floor" ? "–" : `${s.addedP50} ms`} | ${s.p99} ms | ${trips} | ${s.allowed} |`;
  };
  return [
    `## Hot key with a distant store: leases`,
    "",
    `One key asked through \`/check\` at ${lease.rate} requests/s (${lease.connections} connections, ` +
      `${lease.seconds} s, ${lease.repeats} run${lease.repeats > 1 ? "s" : ""} each, alternated, medians), limit ` +
      `${lease.hot.limit} per ${lease.hot.window} (every decision allowed); the store behind a proxy that adds ` +
      `${lease.delayMs} ms before each request. Round trips are the store requests the proxy saw ` +
      `(decisions, lease calls and the give-backs of unspent units) per 1000 allowed decisions, ` +
      `after a second of the same load (not measured: the key's first decisions and lease). ` +
      `Added p50 is the p50 minus the floor's: the same worker and route answering from its ` +
      `denial cache, with no store call.`,
    "",
    "| contender | p50 | added p50 | p99 | store round trips / 1000 allowed | allowed |",
    "| --- | --- | --- | --- | --- | --- |",
    row("leasesOn", 'edge-limiter, `"lease": true`'),
    row("leasesOff", "edge-limiter, no lease"),
    row("anchor", "@upstash/ratelimit slidingWindow"),
    row("floor", "floor: denied from the denial cache, no store call"),
    "",
  ].join("\n");
}
