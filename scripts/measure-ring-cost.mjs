// @ts-check
// Billed commands and Redis µs per decision of the sliding-log script, at the script level
// (EVALSHA straight to a private redis-server: no worker, no HTTP, no denial cache, so every
// decision reaches the store and a denial costs what the store charges for it). The shapes of
// the billed-commands benchmark (bench/lib/billed-commands.mjs), quick enough to iterate on the
// Lua. With --baseline=<git ref>, the script at that ref runs beside this checkout's, alternating
// shape by shape, three rounds (the least µs of each), so the Redis µs compare in one run; with
// --instructions, Redis's instructions per decision instead (callgrind: deterministic, one round).
//
//   node scripts/measure-ring-cost.mjs [--baseline=HEAD] [--rounds=3] [--instructions] [--only=sparse@10,…] [--clock=caller] [--algorithm=<name>]
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { measureEnv, ROOT } from "./lib/measure-env.mjs";
import { freePort } from "./lib/ports.mjs";
import { privateRedisArgs } from "./lib/redis.mjs";

const arg = (/** @type {string} */ name) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const caller = arg("clock") === "caller";
const algorithm = arg("algorithm") ?? "sliding-log";
const baseline = arg("baseline");
const env = await measureEnv({ bridge: false });
/**
 * --instructions: Redis's work as instructions counted by valgrind's callgrind, not µs: the same
 * count for the same work whatever else this shared machine runs, so one round decides. The
 * redis-server runs under callgrind (about 50 times slower), zeroed before each shape and dumped
 * after it.
 */
const instructions = process.argv.includes("--instructions");
let callgrind = /** @type {{ pid: number, dir: string, stop: () => void } | undefined} */ (
  undefined
);
let redisUrl = env.redis.url;
if (instructions) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ring-cost-callgrind-"));
  const child = spawn(
    "valgrind",
    [
      "--tool=callgrind",
      `--callgrind-out-file=${dir}/out`,
      "redis-server",
      ...privateRedisArgs(port, dir),
    ],
    { stdio: "ignore" },
  );
  redisUrl = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    const probe = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 0 });
    const up = await probe.connect().then(
      () => probe.ping(),
      () => undefined,
    );
    probe.disconnect();
    if (up === "PONG") break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  callgrind = { pid: Number(child.pid), dir, stop: () => child.kill("SIGTERM") };
}
/** callgrind_control on the server: "-z" zeroes its counts, "-d" dumps them. @param {string} flag */
const control = (flag) =>
  execFileSync("callgrind_control", [flag, String(callgrind?.pid)], { stdio: "ignore" });
/** The instructions of the newest dump. */
function dumpedInstructions() {
  const dir = /** @type {{ dir: string }} */ (callgrind).dir;
  const dumps = readdirSync(dir)
    .filter((f) => /^out\.\d+$/.test(f))
    .sort((a, b) => Number(a.split(".")[1]) - Number(b.split(".")[1]));
  const text = readFileSync(join(dir, String(dumps.at(-1))), "utf8");
  return Number(/^summary: (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}
const redis = new Redis(redisUrl);
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
  await redis.evalsha(
    sha,
    1,
    key,
    caller ? clock : "",
    `m${member++}`,
    1,
    0,
    0,
    algorithm,
    limit,
    WINDOW,
    1,
  );
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

/**
 * The shapes: name, limit, the keys of its requests in order, and whose keys it goes on with.
 * @type {{ shape: string, limit: number, keys: string[], tagAs?: string }[]}
 */
const SHAPES = [
  ...[10, 100, 1000, 10_000, 100_000].map((limit) => ({
    shape: "sparse",
    limit,
    keys: Array.from({ length: 1000 }, (_, i) => `s${i % 200}`),
  })),
  // Busy: keys driven to 1.5 × the limit, in two parts on the same keys (the store decides every
  // denial here; behind the worker, its denial cache answers most of them).
  ...[10, 100, 1000, 10_000].flatMap((limit) => {
    const keys = limit >= 10_000 ? 1 : 10;
    const keyed = (/** @type {number} */ n) => Array.from({ length: n }, (_, i) => `b${i % keys}`);
    return [
      { shape: "busy-admitted", limit, keys: keyed(limit * keys), tagAs: "busy" },
      { shape: "busy-denied", limit, keys: keyed(Math.round(0.5 * limit) * keys), tagAs: "busy" },
    ];
  }),
];

// --only=sparse@10,busy@1000: those shapes alone (iterating on one case).
const only = arg("only")?.split(",");
if (only)
  SHAPES.splice(0, SHAPES.length, ...SHAPES.filter((c) => only.includes(`${c.shape}@${c.limit}`)));

/** @type {Map<string, { commands: number, usec: number[], detail: string }>} */
const results = new Map();
const ROUNDS = Number(arg("rounds") ?? (baseline ? 3 : 1));
for (let round = 0; round < ROUNDS; round++) {
  for (const { shape, limit, keys, tagAs } of SHAPES) {
    for (const { name, sha } of round % 2 ? [...contenders].reverse() : contenders) {
      // Keys of the same length for every contender (a longer key is more work for Redis).
      const tag = `${contenders.findIndex((c) => c.name === name)}:${round}:${tagAs ?? shape}:${limit}:`;
      await redis.config("RESETSTAT");
      if (callgrind) control("-z");
      for (const key of keys) await decide(sha, tag + key, limit);
      if (callgrind) control("-d");
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
      row.usec.push(callgrind ? dumpedInstructions() / keys.length : usec / keys.length);
      row.detail = parts.sort().join(", ");
      results.set(id, row);
    }
  }
}
const rows = [];
for (const { shape, limit } of SHAPES) {
  const row = /** @type {Record<string, unknown>} */ ({ shape, limit });
  for (const { name } of contenders) {
    const r = results.get(`${shape}|${limit}|${name}`);
    row[`commands (${name})`] = Number(r?.commands.toFixed(3));
    // The least of the rounds: this shared machine only ever adds time.
    if (instructions) {
      row[`instructions (${name})`] = Math.round(Math.min(...(r?.usec ?? [0])));
    } else {
      row[`µs (${name})`] = Number(Math.min(...(r?.usec ?? [0])).toFixed(1));
    }
  }
  if (!baseline) row.detail = results.get(`${shape}|${limit}|this checkout`)?.detail;
  rows.push(row);
}
console.table(rows);
redis.disconnect();
callgrind?.stop();
await env.close();
if (tmp) rmSync(tmp, { recursive: true, force: true });
