// @ts-check
// Where a worker's CPU goes per /check decision, in Node: each whole worker (its fetch
// handler: routing, token, body, limiter, store client, answer) bundled from source by esbuild,
// driven with Request objects through the instant transport of lib/library.mjs (real replies of
// each contender's own scripts, recorded from a private Redis behind the bridge, then answered
// from memory), so only the worker's own JavaScript is timed and profiled.
//
//   node bench/profile-worker.mjs [count per contender, default 20000] [--profile]
//
// Prints CPU µs per decision for our worker and both anchors (alternated, median of 5), and with
// --profile the top functions by self time of our worker, grouped by source file of the bundle.

import { rmSync } from "node:fs";
import { Session } from "node:inspector/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { ROOT, startBridgeProcess, startPrivateRedis, tempDir } from "../tools/infra.mjs";
import { summariseProfile } from "./lib/cpu-profile.mjs";
import {
  cloudflareWorkersStub,
  INSTANT_URL,
  installInstantTransport,
  instant,
} from "./lib/library.mjs";
import { LIMITER_TOKEN, LOADS } from "./lib/load.mjs";

const COUNT = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 20_000);
const PROFILE = process.argv.includes("--profile");
const tmp = tempDir();
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));
const outfile = path.join(tmp, "workers.mjs");
await build({
  stdin: {
    contents: [
      `export { default as ours } from "./worker/worker.ts";`,
      `export { default as anchorMinimal } from "./bench/anchor-minimal-worker.ts";`,
      `export { default as anchorSliding } from "./bench/anchor-worker.ts";`,
    ].join("\n"),
    resolveDir: ROOT,
    loader: "ts",
    sourcefile: "profile-entry.ts",
  },
  bundle: true,
  platform: "neutral",
  mainFields: ["module", "main"],
  resolveExtensions: [".ts", ".js", ".mjs", ".json"],
  conditions: ["workerd", "worker", "import"],
  format: "esm",
  target: "es2022",
  outfile,
  logLevel: "error",
  plugins: [cloudflareWorkersStub],
});
const workers = await import(pathToFileURL(outfile).href);
const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
installInstantTransport(bridge.url);

const env = {
  UPSTASH_REDIS_REST_URL: INSTANT_URL,
  UPSTASH_REDIS_REST_TOKEN: bridge.token,
  LIMITER_TOKEN,
  LIMITER_CONFIG: JSON.stringify({ rules: [], timeoutMs: 500, failMode: "open" }),
  ANCHOR_ALGORITHM: "slidingWindow",
  ANCHOR_TIMEOUT_MS: "500",
};
const ctx = { waitUntil() {}, passThroughOnException() {} };
const mixed = /** @type {(tag: string, n: number) => object} */ (LOADS.mixed);

/** @param {any} worker @param {string} tag @param {number} n */
async function one(worker, tag, n) {
  const response = await worker.fetch(
    new Request("http://worker.local/check", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${LIMITER_TOKEN}` },
      body: JSON.stringify(mixed(tag, n)),
    }),
    env,
    ctx,
  );
  await response.text();
  if (response.status !== 200 && response.status !== 429) {
    throw new Error(`${response.status}: ${await response.text()}`);
  }
}

/** @param {string} id */
async function cpuOf(id) {
  const worker = workers[id];
  const tag = `${id}${Date.now()}`;
  const before = process.cpuUsage();
  for (let i = 0; i < COUNT; i++) await one(worker, tag, i);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / COUNT;
}

const ids = ["ours", "anchorMinimal", "anchorSliding"];
try {
  // Record real replies of each contender's scripts (allowed and denied), then replay them.
  instant.recording = true;
  for (const id of ids) for (let i = 0; i < 400; i++) await one(workers[id], "rec", i);
  instant.recording = false;
  for (const id of ids) for (let i = 0; i < 5000; i++) await one(workers[id], "warm", i);

  /** @type {Record<string, number[]>} */
  const figures = {};
  for (let rep = 0; rep < 5; rep++) {
    for (const id of rep % 2 ? [...ids].reverse() : ids) {
      figures[id] = [...(figures[id] ?? []), await cpuOf(id)];
    }
  }
  const median = (/** @type {number[]} */ v) => [...v].sort((a, b) => a - b)[v.length >> 1] ?? 0;
  for (const id of ids) {
    const list = figures[id] ?? [];
    console.log(
      `${id.padEnd(14)} ${median(list).toFixed(1)} µs/decision (runs: ${list.map((x) => x.toFixed(1)).join(", ")})`,
    );
  }
  const m = median(figures.ours ?? []) / median(figures.anchorMinimal ?? []);
  console.log(`ours ÷ anchorMinimal: ${m.toFixed(2)}×`);

  if (PROFILE) await profile();
} finally {
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
process.exit(0);

/** Self time of our worker's functions over COUNT decisions, by function and by source file. */
async function profile() {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 50 });
  await session.post("Profiler.start");
  await cpuOf("ours");
  const { profile } = await session.post("Profiler.stop");
  session.disconnect();
  console.log(`\nour worker in Node, ${summariseProfile(profile, outfile, COUNT)}`);
}
