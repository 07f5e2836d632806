// @ts-check
// Added latency of the proxy over a direct origin call, side by side, through `npm start`
// (wrangler dev + the bridge + Redis) and the test origin (tools/origin-server.mjs).
//
//   node scripts/proxy-latency.mjs [requests per series, default 400]
//
// Three series, interleaved request by request so drift hits all of them alike:
//   direct     GET origin/plain           (no worker)
//   unmatched  GET worker/plain           (proxy, no rule matches: no store call)
//   limited    GET worker/api/x           (proxy, one rule: one EVALSHA through the bridge)
// Prints median / p90 / p99 per series and the medians' differences. Node only; nothing here
// is a test assertion (timings belong to measurements, not to tests).
import { startOrigin } from "../tools/origin-server.mjs";
import { freePort } from "../tools/ports.mjs";
import { spawnGroup, stopGroup } from "../tools/process-group.mjs";

const N = Number(process.argv[2] ?? 400);
const HOST = "127.0.0.1";
const origin = await startOrigin();
const port = await freePort(HOST);
const config = {
  prefix: `latency-${Date.now()}`,
  rules: [{ name: "api", match: { path: "/api/*" }, limit: 8_000, window: "1m", key: "ip" }],
};
const start = spawnGroup("node", ["scripts/start.mjs"], {
  stdio: ["ignore", "pipe", "pipe"],
  env: {
    ...process.env,
    PORT: String(port),
    BRIDGE_PORT: "0",
    ORIGIN_URL: origin.url,
    LIMITER_CONFIG: JSON.stringify(config),
  },
});
let stopped = false;
const stop = async () => {
  if (stopped) return;
  stopped = true;
  await stopGroup(start, { graceMs: 5000 });
  await origin.close();
};
process.on("SIGINT", () => void stop().then(() => process.exit(130)));

try {
  const workerUrl = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(
      () => reject(new Error(`npm start not ready:\n${out.slice(-2000)}`)),
      120_000,
    );
    start.stdout?.on("data", (chunk) => {
      out += chunk;
      const ready = /edge-limiter ready: worker (\S+)/.exec(out);
      if (ready) {
        clearTimeout(timer);
        resolve(ready[1]);
      }
    });
    start.stderr?.on("data", (chunk) => {
      out += chunk;
    });
    start.once("exit", (code) =>
      reject(new Error(`npm start exited (${code}):\n${out.slice(-2000)}`)),
    );
  });

  /** @param {string} url */
  const time = async (url) => {
    const t0 = performance.now();
    const res = await fetch(url, { headers: { "CF-Connecting-IP": "192.0.2.1" } });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    return performance.now() - t0;
  };
  const series = {
    direct: `${origin.url}/plain`,
    unmatched: `${workerUrl}/plain`,
    limited: `${workerUrl}/api/x`,
  };
  /** @type {Record<string, number[]>} */
  const samples = { direct: [], unmatched: [], limited: [] };
  for (let i = 0; i < 50; i++) for (const url of Object.values(series)) await time(url); // warm-up
  for (let i = 0; i < N; i++) {
    for (const [name, url] of Object.entries(series)) samples[name]?.push(await time(url));
  }
  /** @param {number[]} xs @param {number} q */
  const quantile = (xs, q) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  };
  const ms = (/** @type {number} */ x) => `${x.toFixed(2)} ms`;
  console.log(
    `proxy latency, ${N} sequential requests per series (wrangler dev, local bridge + Redis)`,
  );
  for (const [name, xs] of Object.entries(samples)) {
    console.log(
      `  ${name.padEnd(10)} p50 ${ms(quantile(xs, 0.5))}  p90 ${ms(quantile(xs, 0.9))}  p99 ${ms(quantile(xs, 0.99))}`,
    );
  }
  const median = (/** @type {string} */ name) => quantile(samples[name] ?? [], 0.5);
  console.log(
    `  added by the proxy (p50): unmatched ${ms(median("unmatched") - median("direct"))}, limited ${ms(median("limited") - median("direct"))}`,
  );
} finally {
  await stop();
}
