// @ts-check
// HTTP load against a /check endpoint with autocannon: the request mixes and one run's figures.
// @ts-expect-error autocannon ships no types (and @types/autocannon lags its API)
import autocannon from "autocannon";

export const LIMITER_TOKEN = "bench-limiter-token";

/**
 * Fields every /check body sent to a worker URL carries (e.g. `{ algorithm: "token-bucket" }` for
 * one of our other algorithms), registered when the worker is served.
 * @type {Map<string, object>}
 */
export const bodyExtras = new Map();

/**
 * The loads, as functions from a request counter to a /check body. Every run gets its own key
 * space (`tag`), so runs are independent and repeatable.
 * - mixed: 80 % of requests spread over 10 000 keys well under their limit (100/min), 20 % on 20
 *   keys flooding far over theirs (10/min): most traffic allowed, a steady stream of denials.
 * - allowed: every request allowed (1 000 keys, limit 8 000/min: the sliding log's cap).
 * - denied: 10 keys, limit 10/min: after the first 100 requests, every request denied.
 * @type {Record<string, (tag: string, n: number) => object>}
 */
export const LOADS = {
  mixed: (tag, n) =>
    n % 5 === 0
      ? { key: `${tag}:flood:${(n / 5) % 20}`, limit: 10, window: "1m" }
      : { key: `${tag}:user:${(n * 7919) % 10_000}`, limit: 100, window: "1m" },
  allowed: (tag, n) => ({ key: `${tag}:a:${n % 1000}`, limit: 8_000, window: "1m" }),
  denied: (tag, n) => ({ key: `${tag}:d:${n % 10}`, limit: 10, window: "1m" }),
};

/**
 * @typedef {object} LoadResult
 * @property {number} decisions answers that were decisions (200 or 429)
 * @property {number} allowed 200s
 * @property {number} denied 429s
 * @property {number} errors other statuses, timeouts and socket errors
 * @property {number} perSecond decisions per second
 * @property {number} p50 latency ms
 * @property {number} p99 latency ms
 * @property {Record<string, number>} percentiles latency ms by percentile (for the chart)
 * @property {number} seconds
 */

/**
 * One autocannon run of `load` against `url`: as fast as the worker answers, or at `rate`
 * requests per second over all connections (a fixed offered load, the same for every contender).
 * @param {{ url: string, load: keyof typeof LOADS, tag: string, seconds: number, connections: number, rate?: number }} options
 * @returns {Promise<LoadResult>}
 */
export async function runLoad({ url, load, tag, seconds, connections, rate }) {
  const body = LOADS[load];
  if (!body) throw new Error(`unknown load ${load}`);
  const extra = bodyExtras.get(url) ?? {};
  let n = 0;
  const result = await autocannon({
    url: `${url}/check`,
    connections,
    duration: seconds,
    pipelining: 1,
    timeout: 30,
    ...(rate ? { overallRate: rate } : {}),
    requests: [
      {
        method: "POST",
        path: "/check",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${LIMITER_TOKEN}`,
        },
        setupRequest: (/** @type {object} */ request) => ({
          ...request,
          body: JSON.stringify({ ...body(tag, n++), ...extra }),
        }),
      },
    ],
  });
  return summarise(result);
}

/**
 * An autocannon result as a LoadResult.
 * @param {any} result
 * @returns {LoadResult}
 */
function summarise(result) {
  const codes = /** @type {Record<string, { count: number }>} */ (result.statusCodeStats ?? {});
  const allowed = Number(codes["200"]?.count ?? 0);
  const denied = Number(codes["429"]?.count ?? 0);
  const total = Object.values(codes).reduce((sum, c) => sum + Number(c.count), 0);
  const decisions = allowed + denied;
  const latency = /** @type {Record<string, number>} */ (/** @type {unknown} */ (result.latency));
  const percentiles = Object.fromEntries(
    Object.entries(latency)
      .filter(([name]) => /^p\d/.test(name))
      .map(([name, value]) => [name.slice(1).replace("_", "."), value]),
  );
  return {
    decisions,
    allowed,
    denied,
    errors: total - decisions + result.errors + result.timeouts,
    perSecond: decisions / result.duration,
    p50: latency.p50 ?? Number.NaN,
    p99: latency.p99 ?? Number.NaN,
    percentiles,
    seconds: result.duration,
  };
}

/**
 * The proxy's rules for the proxy-path runs: the mixed load's two limits, one rule each, keyed on
 * a header so the load generator names the client (no CF-Connecting-IP locally).
 */
export const PROXY_RULES = [
  { name: "api", match: { path: "/api/*" }, limit: 100, window: "1m", key: "header:X-Client" },
  { name: "flood", match: { path: "/flood/*" }, limit: 10, window: "1m", key: "header:X-Client" },
];

/**
 * The mixed load through the proxy: GET /api/x (80 %, 10 000 clients at 100/min) and /flood/x
 * (20 %, 20 clients at 10/min), the client in X-Client. `matched: false` sends the same requests
 * under /plain/, which no rule matches: forwarded without a decision (what forwarding alone costs).
 * Decisions are the 200s and 429s.
 * @param {{ url: string, tag: string, seconds: number, connections: number, matched: boolean, rate?: number }} options
 * @returns {Promise<LoadResult>}
 */
export async function runProxyLoad({ url, tag, seconds, connections, matched, rate }) {
  let n = 0;
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    pipelining: 1,
    timeout: 30,
    ...(rate ? { overallRate: rate } : {}),
    requests: [
      {
        method: "GET",
        setupRequest: (/** @type {object} */ request) => {
          const i = n++;
          const flood = i % 5 === 0;
          const client = flood ? `${tag}:f${(i / 5) % 20}` : `${tag}:u${(i * 7919) % 10_000}`;
          return {
            ...request,
            path: matched ? (flood ? "/flood/x" : "/api/x") : "/plain/x",
            headers: { "x-client": client },
          };
        },
      },
    ],
  });
  return summarise(result);
}

/**
 * One /check call (for the low-rate phases: accuracy, round-trip counting).
 * @param {string} url
 * @param {object} body
 * @returns {Promise<{ status: number, allowed: boolean, source: string }>}
 */
export async function check(url, body) {
  const response = await fetch(`${url}/check`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
    body: JSON.stringify({ ...body, ...bodyExtras.get(url) }),
  });
  const json = /** @type {{ allowed?: boolean, source?: string }} */ (await response.json());
  return { status: response.status, allowed: json.allowed === true, source: json.source ?? "" };
}
