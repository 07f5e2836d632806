// @ts-check
// Billed commands and Redis µs per decision of the sliding-log script, at the script level
// (EVALSHA straight to a private redis-server: no worker, no HTTP, no denial cache, so every
// decision reaches the store and a denial costs what the store charges for it). The shapes of
// the billed-commands benchmark (bench/lib/billed-commands.mjs), quick enough to iterate on the
// Lua. With --baseline=<git ref>, the script at that ref runs beside this checkout's, alternating
// shape by shape, three rounds, so the Redis µs (which swing with the machine) compare in one run.
//
//   node scripts/measure-ring-cost.mjs [--baseline=HEAD] [--clock=caller] [--algorithm=sliding-log-zset]
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { measureEnv, ROOT } from "./lib/measure-env.mjs";

const arg = (/** @type {string} */ name) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const caller = arg("clock") === "caller";
const algorithm = arg("algorithm") ?? "sliding-log";
const baseline = arg("baseline");
const env = await measureEnv({ bridge: false });
const redis = new Redis(env.redis.url);
const entry = `export { EVALUATE_SCRIPTS } from "./src/store/lua/scripts";`;

/** @param {any} lib */
async function load(lib) {
  const script = lib.EVALUATE_SCRIPTS[algorithm].replace(/^#!lua flags=[^\n]*\n/, "#!lua\n");
  return String(await redis.script("LOAD", script));
}
/** @type {{ name: string, sha: string }[]} */
const contenders = [{ name: "this checkout", sha: await load(await env.bundle(entry)) }];
let tmp = "";
if (baseline) {
  tmp = mkdtempSync(join(tmpdir(), "ring-cost-"));
  const tar = execFileSync("git", ["-C", ROOT, "archive", baseline, "src"]);
  execFileSync("tar", ["-x", "-C", tmp], { input: tar });
  const lib = await env.bundle(entry.replace("./src/", `${tmp}/src/`));
  contenders.push({ name: baseline, sha: await load(lib) });
}

const WINDOW = 60_000;
let clock = 1_700_000_000_000;
let member = 0;

/** One decision of cost 1. @param {string} sha @param {string} key @param {number} limit */
async function decide(sha, key, limit) {
  clock += 1;
  await redis.evalsha(sha, 1, key, caller ? clock : "", `m${member++}`, 1, 0, 0, algorithm,
    limit, WINDOW, 1);
}

/** @returns {Promise<Map<string, { calls: number, usec: number }>>} */
async function stats() {
  const text = String(await redis.info("commandstats"));
  const out = new Map();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    out.set(String(m[1]), { calls: Number(m[2]), usec: Number(m[3]) });
  }
  return out;
}

/** The shapes: name, limit, and the keys of its requests in order. */
const SHAPES = [
  ...[10, 100, 1000, 10_000, 100_000].map((limit) => ({
    shape: "sparse",
    limit,
    keys: Array.from({ length: 1000 }, (_, i) => `s${i % 200}`),
  })),
  ...[10, 100, 1000, 10_000].map((limit) => {
    const keys = limit >= 10_000 ? 1 : 10;
    const n = Math.round(1.5 * limit) * keys;
    return { shape: "busy", limit, keys: Array.from({ length: n }, (_, i) => `b${i % keys}`) };
  }),
];

/** @type {Map<string, { commands: number, usec: number[], detail: string }>} */
const results = new Map();
for (let round = 0; round < (baseline ? 3 : 1); round++) {
  for (const { shape, limit, keys } of SHAPES) {
    for (const { name, sha } of round % 2 ? [...contenders].reverse() : contenders) {
      const tag = `${name}:${round}:${shape}:${limit}:`;
      await redis.config("RESETSTAT");
      for (const key of keys) await decide(sha, tag + key, limit);
      let commands = 0;
      let usec = 0;
      /** @type {string[]} */
      const parts = [];
      for (const [command, s] of await stats()) {
        if (/^(info|config)/.test(command)) continue;
        commands += s.calls;
        if (command === "evalsha") usec = s.usec;
        parts.push(`${command} ${(s.calls / keys.length).toFixed(2)}`);
      }
      const id = `${shape}|${limit}|${name}`;
      const row = results.get(id) ?? { commands: 0, usec: [], detail: "" };
      row.commands = commands / keys.length;
      row.usec.push(usec / keys.length);
      row.detail = parts.sort().join(", ");
      results.set(id, row);
    }
  }
}
const median = (/** @type {number[]} */ v) => [...v].sort((a, b) => a - b)[v.length >> 1] ?? 0;
const rows = [];
for (const { shape, limit } of SHAPES) {
  const row = /** @type {Record<string, unknown>} */ ({ shape, limit });
  for (const { name } of contenders) {
    const r = results.get(`${shape}|${limit}|${name}`);
    row[`commands (${name})`] = Number(r?.commands.toFixed(3));
    row[`µs (${name})`] = Number(median(r?.usec ?? []).toFixed(1));
  }
  if (!baseline) row.detail = results.get(`${shape}|${limit}|this checkout`)?.detail;
  rows.push(row);
}
console.table(rows);
redis.disconnect();
await env.close();
if (tmp) rmSync(tmp, { recursive: true, force: true });
