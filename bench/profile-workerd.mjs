// @ts-check
// Where our worker's CPU goes inside workerd itself (issue 12): src/worker.ts built as it deploys,
// served by workerd with its V8 inspector on, the mixed /check load (or the proxy load) for a few
// seconds with the CPU profiler running; self time by source file and function of the bundle.
//
//   node bench/profile-workerd.mjs [seconds, default 6] [--proxy] [--minimal]
//
// --minimal profiles the minimal anchor (bench/anchor-minimal-worker.ts) instead. Profiling slows
// the worker: read the shares, not the µs, and take CPU figures from `npm run bench`.
import { rmSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { freePort } from "../scripts/lib/ports.mjs";
import { startOrigin } from "../test/support/origin-server.mjs";
import { summariseProfile } from "./lib/cpu-profile.mjs";
import {
  buildWorkers,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
} from "./lib/infra.mjs";
import { LIMITER_TOKEN, PROXY_RULES, runLoad, runProxyLoad } from "./lib/load.mjs";

// The WebSocket client Miniflare itself depends on (Node 20 has no global WebSocket).
const fromMiniflare = createRequire(
  createRequire(createRequire(import.meta.url).resolve("wrangler/package.json")).resolve(
    "miniflare",
  ),
);
/** @type {any} */
const WebSocket = fromMiniflare("ws");

const SECONDS = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 6);
const proxy = process.argv.includes("--proxy");
const minimal = process.argv.includes("--minimal");
const tmp = tempDir();
const bundles = await buildWorkers(tmp);
const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
const origin = await startOrigin();
const inspectorPort = await freePort();
const scriptPath = minimal ? bundles.anchorMinimal : bundles.ours;
const worker = await serveWorker({
  scriptPath,
  inspectorPort,
  bindings: {
    UPSTASH_REDIS_REST_URL: bridge.url,
    UPSTASH_REDIS_REST_TOKEN: bridge.token,
    LIMITER_TOKEN,
    LIMITER_CONFIG: JSON.stringify({
      rules: proxy ? PROXY_RULES : [],
      timeoutMs: 500,
      failMode: "open",
    }),
    ORIGIN_URL: origin.url,
  },
});
/** @param {string} tag @param {number} seconds */
const load = (tag, seconds) =>
  proxy
    ? runProxyLoad({ url: worker.url, tag, seconds, connections: 32, matched: true })
    : runLoad({ url: worker.url, load: "mixed", tag, seconds, connections: 32 });
try {
  await load("warm", 2);
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((/** @type {any} */ t) => t.webSocketDebuggerUrl) ?? targets[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let id = 0;
  /** @type {Map<number, (value: any) => void>} */
  const waiting = new Map();
  ws.on("message", (/** @type {Buffer} */ data) => {
    const message = JSON.parse(String(data));
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  /** @param {string} method @param {object} [params] @returns {Promise<any>} */
  const post = (method, params = {}) =>
    new Promise((resolve) => {
      const n = ++id;
      waiting.set(n, resolve);
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  await post("Profiler.enable");
  await post("Profiler.setSamplingInterval", { interval: 100 });
  await post("Profiler.start");
  const run = await load(`p${Date.now()}`, SECONDS);
  const { profile } = await post("Profiler.stop");
  ws.close();
  console.log(
    `${path.basename(scriptPath)} in workerd${proxy ? " (proxy)" : ""}: ${run.perSecond.toFixed(0)} decisions/s while profiled\n` +
      summariseProfile(profile, scriptPath, run.decisions),
  );
} finally {
  await worker.dispose();
  await origin.close();
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(0);
