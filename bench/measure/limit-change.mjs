// @ts-check
// A full ring whose limit alternates call by call (a function limit in the middleware or the
// library, two versions of a rule during a deploy): Redis µs per call, from INFO commandstats
// (the EVALSHA's usec, read after every call, so the max is a single call's), and the key's
// STRLEN and MEMORY USAGE after the alternations. The sliding-log script called straight
// (EVALSHA on a private redis-server: no worker, no HTTP, no denial cache), on the caller's
// clock. With --baseline=<git ref>, the script at that ref runs beside this checkout's, on keys
// of the same length, one case after the other.
//
//   node bench/measure/limit-change.mjs [--baseline=HEAD] [--calls=60] [--json out.json]
//
// Each case: a key filled to 100 000 (100 calls of cost 1 000, 1 ms apart, a 1-hour window),
// then `calls` decisions of cost 1 alternating the two limits, 1 ms apart: "full" while every
// unit is inside the window (every call is denied), then "draining" from one window after the
// fill, when a batch of 1 000 units leaves every ms (calls are admitted, each at its own limit).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { measureEnv, ROOT } from "../../tools/measure-env.mjs";

const arg = (/** @type {string} */ name) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const baseline = arg("baseline");
const CALLS = Number(arg("calls") ?? 60);
const jsonAt = process.argv.indexOf("--json");
const jsonOut = jsonAt >= 0 ? process.argv[jsonAt + 1] : undefined;
const env = await measureEnv({ bridge: false });
const redis = new Redis(env.redis.url);
const entry = `export { EVALUATE_SCRIPTS } from "./src/store/lua/scripts";`;

/** @param {any} lib */
async function load(lib) {
  const script = lib.EVALUATE_SCRIPTS["sliding-log"].replace(/^#!lua flags=[^\n]*\n/, "#!lua\n");
  return String(await redis.script("LOAD", script));
}
/** @type {{ name: string, sha: string }[]} */
const contenders = [{ name: "this checkout", sha: await load(await env.bundle(entry)) }];
let tmp = "";
if (baseline) {
  tmp = mkdtempSync(join(tmpdir(), "limit-change-"));
  const tar = execFileSync("git", ["-C", ROOT, "archive", baseline, "src"]);
  execFileSync("tar", ["-x", "-C", tmp], { input: tar });
  const lib = await env.bundle(entry.replace("./src/", `${tmp}/src/`));
  contenders.push({ name: baseline, sha: await load(lib) });
}

const WINDOW = 3_600_000;
const FULL = 100_000;
const T = 1_700_000_000_000;
let member = 0;

/** One decision: whether it was allowed. @param {string} sha @param {string} key */
async function decide(sha, key, /** @type {number} */ now, /** @type {number} */ limit, cost = 1) {
  const reply = /** @type {number[]} */ (
    await redis.evalsha(
      sha,
      1,
      key,
      now,
      `m${member++}`,
      1,
      0,
      0,
      "sliding-log",
      limit,
      WINDOW,
      cost,
    )
  );
  return reply[0] === 1;
}

/** The EVALSHA's cumulative usec. */
async function evalUsec() {
  const text = String(await redis.info("commandstats"));
  return Number(/^cmdstat_evalsha:calls=\d+,usec=(\d+)/m.exec(text)?.[1] ?? 0);
}

// The last, a limit that does not change: what a call costs anyway (a lap's whole rewrite, once
// per 100 000 admissions, is each case's max while draining).
/** @type {[number, number][]} */
const CASES = [
  [FULL, FULL - 1],
  [FULL, 100],
  [FULL, FULL],
];
const rows = [];
for (const [high, low] of CASES) {
  for (const [c, { name, sha }] of contenders.entries()) {
    const key = `lc:${c}:${high}:${low}`;
    await redis.del(key);
    for (let i = 0; i < FULL / 1_000; i++) await decide(sha, key, T + i, FULL, 1_000);
    for (const [phase, start] of /** @type {const} */ ([
      ["full", T + 1_000],
      ["draining", T + WINDOW],
    ])) {
      /** @type {number[]} */
      const usec = [];
      let admitted = 0;
      for (let i = 0; i < CALLS; i++) {
        const before = await evalUsec();
        if (await decide(sha, key, start + i, i % 2 ? low : high)) admitted++;
        usec.push((await evalUsec()) - before);
      }
      const sorted = [...usec].sort((a, b) => a - b);
      rows.push({
        limits: `${high} ↔ ${low}`,
        phase,
        contender: name,
        "µs/call": Math.round(usec.reduce((a, b) => a + b, 0) / usec.length),
        "median µs": sorted[Math.floor(sorted.length / 2)],
        "max µs": sorted.at(-1),
        admitted: `${admitted}/${CALLS}`,
        STRLEN: Number(await redis.strlen(key)),
        "MEMORY USAGE": Number(await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0")),
      });
    }
    await redis.del(key);
  }
}
console.table(rows);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify({ calls: CALLS, rows }, null, 2)}\n`);
redis.disconnect();
await env.close();
if (tmp) rmSync(tmp, { recursive: true, force: true });
