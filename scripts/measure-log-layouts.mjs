// @ts-check
// The exact log (the ring) per limit: Redis commands and Redis CPU
// (INFO commandstats: calls and usec, the script's own commands included) per decision, for a key
// full to its limit that admits one unit per decision (the steady state at the limit: each decision
// frees and takes one slot) and for one that denies; and MEMORY USAGE of the full key. The
// anchor, @upstash/ratelimit's slidingWindow, beside them. Real scripts, the real @upstash/redis
// client and the project's REST bridge, on a private redis-server (commandstats of a shared Redis
// would count everyone's traffic).
//
//   node scripts/measure-log-layouts.mjs [decisions=500] [--json out.json]   (ROUNDS=5, LIMITS=10,100,…)
//
// Each limit runs `decisions` admissions then as many denials per round; the limits alternate,
// round after round, and the table gives medians (the machine is shared). (The seeds' sorted set
// ran beside it until it was retired: docs/algorithms.md keeps its last figures.)
//
// Decisions run on the caller's clock (ARGV now), so a run is deterministic: with the Redis clock
// (the default) every call of ours adds one TIME. The anchor always takes the client's clock.
//
// The keys are filled through the bridge and the client (the production path); the measured
// decisions are the same EVALSHA calls sent pipelined on one connection (--through-bridge: one at a
// time through the bridge instead). One at a time, Redis idles between calls and its µs figures
// swing ±20 % run to run on a shared machine; pipelined they repeat within a few per cent.
import { writeFileSync } from "node:fs";
import net from "node:net";
import { measureEnv } from "./lib/measure-env.mjs";

const args = process.argv.slice(2);
const jsonAt = args.indexOf("--json");
const jsonOut = jsonAt >= 0 ? args[jsonAt + 1] : undefined;
const throughBridge = args.includes("--through-bridge");
const N = Number(args.find((a, i) => /^\d+$/.test(a) && !(jsonAt >= 0 && i === jsonAt + 1)) ?? 500);
const LIMITS = (process.env.LIMITS ?? "10,100,1000,10000,100000").split(",").map(Number);
const LAYOUTS = ["sliding-log"];

const env = await measureEnv();
const { port, cli, token } = env;
const bridge = /** @type {{ url: string }} */ (env.bridge);
// The store layer itself (no caps) and the anchor, bundled as the worker bundles them.
const lib = await env.bundle(`export { EVALUATE_SCRIPTS } from "./src/store/lua/scripts";
export { createStoreClient } from "./src/store/upstash-client";
export { runScript } from "./src/store/script-runner";
export { Ratelimit } from "@upstash/ratelimit";
export { Redis } from "@upstash/redis";`);
const store = lib.createStoreClient({ url: bridge.url, token, timeoutMs: 30_000 });

/**
 * One evaluate call of one policy, as evaluate() sends it (script-inputs.ts), minus the caps.
 * @param {string} algorithm @param {string} key @param {number} limit @param {number} windowMs
 * @param {number} cost @param {number} now @param {string} member
 */
async function decide(algorithm, key, limit, windowMs, cost, now, member) {
  const args = [now, member, 1, 0, 0, algorithm, limit, windowMs, cost];
  const reply = await lib.runScript(store, lib.EVALUATE_SCRIPTS[algorithm], [key], args);
  return reply[0] === 1;
}

// A minimal RESP client for the pipelined mode: the evaluate script answers flat integer arrays.
const socket = net.connect(Number(port), "127.0.0.1");
await new Promise((resolve) => socket.once("connect", resolve));
/** @param {(string|number)[]} command */
const encode = (command) =>
  `*${command.length}\r\n${command.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join("")}`;
/**
 * Sends the commands in one write and returns each reply's first integer (1 = allowed).
 * @param {(string|number)[][]} commands
 * @returns {Promise<number[]>}
 */
function pipeline(commands) {
  return new Promise((resolve, reject) => {
    let buffer = "";
    const onData = (/** @type {Buffer} */ chunk) => {
      buffer += chunk.toString("latin1");
      // Replies: "*<n>" then n ":<int>" lines, or one "-<error>" line.
      const lines = buffer.split("\r\n");
      /** @type {number[]} */
      const firsts = [];
      let i = 0;
      while (i < lines.length - 1) {
        const line = lines[i] ?? "";
        if (line.startsWith("-")) {
          socket.off("data", onData);
          return reject(new Error(line));
        }
        const count = Number(line.slice(1));
        if (i + count >= lines.length - 1) break;
        firsts.push(Number((lines[i + 1] ?? ":0").slice(1)));
        i += count + 1;
      }
      if (firsts.length === commands.length) {
        socket.off("data", onData);
        resolve(firsts);
      }
    };
    socket.on("data", onData);
    socket.write(commands.map(encode).join(""));
  });
}
const shas = Object.fromEntries(
  LAYOUTS.map((algorithm) => [
    algorithm,
    cli(
      "SCRIPT",
      "LOAD",
      lib.EVALUATE_SCRIPTS[algorithm].replace(/^#!lua flags=[^\n]*\n/, "#!lua\n"),
    ).trim(),
  ]),
);

/**
 * Many decisions of one key, one at a time through the bridge or pipelined; how many were allowed.
 * @param {string} algorithm @param {string} key @param {number} limit @param {number} windowMs
 * @param {{ now: number, member: string }[]} calls
 */
async function decideMany(algorithm, key, limit, windowMs, calls) {
  if (throughBridge) {
    let allowed = 0;
    for (const { now, member } of calls) {
      if (await decide(algorithm, key, limit, windowMs, 1, now, member)) allowed++;
    }
    return allowed;
  }
  const firsts = await pipeline(
    calls.map(({ now, member }) => [
      "EVALSHA",
      shas[algorithm] ?? "",
      1,
      key,
      now,
      member,
      1,
      0,
      0,
      algorithm,
      limit,
      windowMs,
      1,
    ]),
  );
  return firsts.filter((first) => first === 1).length;
}

/** Commands and µs Redis spent while `work` ran (every command, the scripts' inner ones too). */
async function statsDuring(/** @type {() => Promise<void>} */ work) {
  cli("CONFIG", "RESETSTAT");
  await work();
  let calls = 0;
  let scriptUsec = 0;
  /** @type {Record<string, number>} */
  const byCommand = {};
  for (const line of cli("INFO", "commandstats").split("\n")) {
    const match = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
    if (!match?.[1] || /^(info|config|script)/.test(match[1])) continue;
    calls += Number(match[2]);
    byCommand[match[1]] = Number(match[2]);
    // EVALSHA's usec covers the whole script, its inner commands included.
    if (/^eval/.test(match[1])) scriptUsec += Number(match[3]);
  }
  return { calls, scriptUsec, byCommand };
}

/** @param {string} key */
function memoryUsage(key) {
  return Number(cli("MEMORY", "USAGE", key, "SAMPLES", "0").trim());
}

const T = 1_700_000_000_000;
const ROUNDS = Number(process.env.ROUNDS ?? 5);
const STEP = 1_000;
/** @param {number[]} values */
const median = (values) =>
  [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)] ?? Number.NaN;

// Set up every key full to its limit: filled in chunks of k units, STEP ms apart on the caller's
// clock; the window holds exactly limit / k chunks, so at the limit every STEP frees one chunk,
// which the next k decisions of cost 1 take. (Seconds, not ms: the keys' TTLs run in real time
// while the caller's clock does not.)
/** @type {{ algorithm: string, limit: number, key: string, k: number, windowMs: number, now: number, taken: number, bytes: number, admitted: {calls: number, usec: number}[], denied: {calls: number, usec: number}[], detail: Record<string, number> }[]} */
const cases = [];
for (const limit of LIMITS) {
  const k = Math.max(1, Math.floor(limit / 1_000));
  const windowMs = (limit / k) * STEP;
  for (const algorithm of LAYOUTS) {
    const key = `measure:${algorithm}:${limit}:{203.0.113.7}`;
    let now = T;
    for (let i = 0; i < limit / k; i++) {
      if (!(await decide(algorithm, key, limit, windowMs, k, now, `fill${i}`))) {
        throw new Error(`${algorithm} ${limit}: fill denied at ${i}`);
      }
      now += STEP;
    }
    const bytes = memoryUsage(key);
    cases.push({
      algorithm,
      limit,
      key,
      k,
      windowMs,
      now,
      taken: 0,
      bytes,
      admitted: [],
      denied: [],
      detail: {},
    });
  }
}
// Alternate the keys, round after round, and take medians: this machine is shared.
let n = 0;
for (let round = 0; round < ROUNDS; round++) {
  for (const c of cases) {
    let admitted = 0;
    const allowed = await statsDuring(async () => {
      /** @type {{ now: number, member: string }[]} */
      const calls = [];
      for (let i = 0; i < N; i++) {
        if (c.taken === c.k) {
          c.now += STEP;
          c.taken = 0;
        }
        calls.push({ now: c.now, member: `AbCdEfGhIjKl${n++}` });
        c.taken++;
      }
      admitted = await decideMany(c.algorithm, c.key, c.limit, c.windowMs, calls);
    });
    if (admitted !== N)
      throw new Error(`${c.algorithm} ${c.limit}: ${admitted}/${N} admitted at the limit`);
    // Top the key up (N need not be a multiple of k): full at \`now\`, every decision is a denial.
    if (c.taken < c.k) {
      if (
        !(await decide(c.algorithm, c.key, c.limit, c.windowMs, c.k - c.taken, c.now, "top-up"))
      ) {
        throw new Error(`${c.algorithm} ${c.limit}: top-up denied`);
      }
      c.taken = c.k;
    }
    let denied = 0;
    const refused = await statsDuring(async () => {
      const calls = Array.from({ length: N }, () => ({ now: c.now, member: `AbCdEfGhIjKl${n++}` }));
      denied = N - (await decideMany(c.algorithm, c.key, c.limit, c.windowMs, calls));
    });
    if (denied !== N) throw new Error(`${c.algorithm} ${c.limit}: ${denied}/${N} denied when full`);
    c.admitted.push({ calls: allowed.calls / N, usec: allowed.scriptUsec / N });
    c.denied.push({ calls: refused.calls / N, usec: refused.scriptUsec / N });
    c.detail = allowed.byCommand;
    if (process.env.DEBUG)
      console.log(c.algorithm, c.limit, "denied:", JSON.stringify(refused.byCommand));
  }
}
const rows = [];
for (const c of cases) {
  rows.push({
    contender: c.algorithm,
    limit: c.limit,
    bytes: c.bytes,
    "bytes/unit": Number((c.bytes / c.limit).toFixed(1)),
    "admitted: cmds": Number(median(c.admitted.map((x) => x.calls)).toFixed(2)),
    "admitted: µs": Number(median(c.admitted.map((x) => x.usec)).toFixed(1)),
    "denied: cmds": Number(median(c.denied.map((x) => x.calls)).toFixed(2)),
    "denied: µs": Number(median(c.denied.map((x) => x.usec)).toFixed(1)),
    detail: JSON.stringify(c.detail),
  });
}
// The anchor (its own clock, Date.now(); its commands do not depend on the limit): admissions on a
// fresh key, denials on a key it filled first (at limit 1 000).
{
  const anchor = new lib.Ratelimit({
    redis: new lib.Redis({ url: bridge.url, token, enableTelemetry: false }),
    limiter: lib.Ratelimit.slidingWindow(1_000, "60 s"),
    prefix: "anchor",
    analytics: false,
    enableProtection: false,
    ephemeralCache: false,
  });
  await anchor.limit("warm");
  const a = Math.min(N, 1_000);
  const anchorAllowed = await statsDuring(async () => {
    for (let i = 0; i < a; i++) await anchor.limit("k");
  });
  for (let i = 0; i < 1_000; i++) await anchor.limit("full");
  const anchorDenied = await statsDuring(async () => {
    for (let i = 0; i < N; i++) await anchor.limit("full");
  });
  const keys = cli("--scan", "--pattern", "anchor:k:*").split("\n").filter(Boolean);
  const bytes = keys.reduce((sum, key) => sum + memoryUsage(key), 0);
  rows.push({
    contender: "anchor slidingWindow",
    limit: 1_000,
    bytes,
    "bytes/unit": Number((bytes / 1_000).toFixed(2)),
    "admitted: cmds": Number((anchorAllowed.calls / a).toFixed(2)),
    "admitted: µs": Number((anchorAllowed.scriptUsec / a).toFixed(1)),
    "denied: cmds": Number((anchorDenied.calls / N).toFixed(2)),
    "denied: µs": Number((anchorDenied.scriptUsec / N).toFixed(1)),
    detail: JSON.stringify(anchorAllowed.byCommand),
  });
}
console.table(rows.map(({ detail, ...row }) => row));
for (const row of rows) console.log(`${row.contender} ${row.limit}: ${row.detail}`);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify({ decisions: N, rows }, null, 2)}\n`);

socket.end();
await env.close();
