// @ts-check
// Where a worker's workerd process spends its user-space CPU, native code included: what the V8
// profile of bench/profile-workerd.mjs cannot see (workerd's C++ and Rust, kj's event loop,
// malloc) or only sees as "(program)". Each worker is served by workerd alone (as the CPU
// section of `npm run bench` serves it), warmed, then sampled by Linux `perf record` (user space
// only: cpu-clock:u, which an unprivileged user may sample) under the mixed /check load; the
// samples are grouped by part of the runtime and given in µs per decision.
//
//   node bench/perf-workerd.mjs [seconds, default 5] [--rate=N] [--with=ours,anchorMinimal,floor]
//     [--diff=ours,floor] [--top=N]
//
// --rate=N: N requests/s (as the CPU section's figure), else flat out. --diff=a,b lists the
// functions where `a` spends the most more than `b` per decision (--top of them, default 30).
// Needs `perf` on PATH. Kernel time (syscalls) is not sampled, and the workers are sampled one
// after the other (no alternation), so on a shared machine the totals drift with its load: take
// CPU ratios from the CPU section or bench/ab-cpu.mjs, and from this where the time goes.
import { spawn, spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import path from "node:path";
import { serveWorker, startBridgeProcess, startPrivateRedis, tempDir } from "../tools/infra.mjs";
import { buildWorkers } from "./lib/build-workers.mjs";
import { LIMITER_TOKEN, runLoad } from "./lib/load.mjs";

/** @param {string} name */
const option = (name) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const SECONDS = Number(process.argv.find((a) => /^\d+$/.test(a)) ?? 5);
const rate = Number(option("rate")) || undefined;
const ids = (option("with") ?? "ours,anchorMinimal,floor").split(",").filter(Boolean);
const diff = option("diff")?.split(",");
const top = Number(option("top")) || 30;
/** Samples a second: each sample stands for 1/FREQUENCY s of CPU. */
const FREQUENCY = 4000;

if (spawnSync("perf", ["--version"]).status !== 0) {
  console.error("perf-workerd: needs Linux perf on PATH (e.g. apt-get install linux-perf)");
  process.exit(1);
}

/**
 * The part of the runtime a sampled function belongs to, by its shared object and symbol.
 * Checked in this order: the first match names it.
 * @type {[string, (dso: string, symbol: string) => boolean][]}
 */
const PARTS = [
  ["JS: JIT-compiled code", (dso) => dso.startsWith("[JIT]")],
  ["JS: interpreter and V8 builtins", (_, s) => s.startsWith("Builtins_")],
  ["malloc (tcmalloc)", (_, s) => /tcmalloc|TCMalloc/.test(s)],
  [
    "V8 garbage collection",
    (_, s) =>
      /Scaveng|MarkCompact|Heap::|Marking|Sweep|Evacuat|GlobalHandles|IsUnmodifiedApi|cppgc|HeapTracer/.test(
        s,
      ),
  ],
  ["jsg (JS <-> C++ glue)", (_, s) => s.includes("jsg::")],
  [
    "Rust HTTP (hyper, tokio)",
    (_, s) => /hyper|tokio|kj_rs|^<?http::|bytes::|h2::|mio::|core::ptr/.test(s),
  ],
  ["V8 runtime (ICs, objects, strings, JSON)", (_, s) => /v8::|v8_/.test(s)],
  ["workerd API (Request, Response, Headers, fetch)", (_, s) => s.includes("workerd::")],
  ["kj (event loop, promises, HTTP)", (_, s) => s.includes("kj::")],
  ["libc (memcpy, memset, …)", (dso) => /^libc|^libm|^\[vdso\]/.test(dso)],
  ["other", () => true],
];

/**
 * Samples by shared object and symbol, from `perf report`.
 * @param {string} data
 * @returns {{ dso: string, symbol: string, samples: number }[]}
 */
function samplesOf(data) {
  const report = spawnSync(
    "perf",
    ["report", "-i", data, "--no-children", "--stdio", "-g", "none", "-F", "sample,dso,sym"],
    { encoding: "utf8", maxBuffer: 256 * 1024 * 1024, stdio: ["ignore", "pipe", "ignore"] },
  ).stdout;
  const rows = [];
  for (const line of report.split("\n")) {
    // "  123  workerd  [.] symbol", or "  1  [JIT] tid 123  [.] 0x…" (one row per address)
    const match = /^\s+(\d+)\s+(\[JIT\] tid \d+|\S+)\s+\[.\]\s+(.*)$/.exec(line);
    if (match) {
      rows.push({
        dso: match[2] ?? "",
        symbol: (match[3] ?? "").trim(),
        samples: Number(match[1]),
      });
    }
  }
  return rows;
}

const tmp = tempDir();
const bundles = /** @type {Record<string, string>} */ (await buildWorkers(tmp));
const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
/** @type {Record<string, { perDecision: Map<string, number>, bySymbol: Map<string, number>, decisions: number }>} */
const results = {};
try {
  for (const id of ids) {
    const scriptPath = bundles[id];
    if (!scriptPath) throw new Error(`--with: no worker ${id} (ours, anchorMinimal, floor)`);
    const worker = await serveWorker({
      scriptPath,
      bindings: {
        UPSTASH_REDIS_REST_URL: bridge.url,
        UPSTASH_REDIS_REST_TOKEN: bridge.token,
        LIMITER_TOKEN,
        LIMITER_CONFIG: JSON.stringify({ rules: [], timeoutMs: 500, failMode: "open" }),
      },
    });
    try {
      /** @param {string} tag @param {number} seconds */
      const load = (tag, seconds) =>
        runLoad({
          url: worker.url,
          load: "mixed",
          tag,
          seconds,
          connections: 32,
          ...(rate ? { rate } : {}),
        });
      // Warm, as a deployed isolate runs: its functions compiled, its caches in use.
      await load(`perfwarm${id}${Date.now()}`, 3);
      const data = path.join(tmp, `${id}.perf.data`);
      const perf = spawn(
        "perf",
        [
          "record",
          "-q",
          "-e",
          "cpu-clock:u",
          "-F",
          String(FREQUENCY),
          "-p",
          String(worker.pid),
          "-o",
          data,
        ],
        { stdio: "ignore" },
      );
      const exited = new Promise((resolve) => perf.once("exit", resolve));
      await new Promise((resolve) => setTimeout(resolve, 300));
      const run = await load(`perf${id}${Date.now()}`, SECONDS);
      perf.kill("SIGINT");
      await exited;
      const usPerSample = 1e6 / FREQUENCY;
      const perDecision = new Map();
      const bySymbol = new Map();
      for (const { dso, symbol, samples } of samplesOf(data)) {
        const part = PARTS.find(([, test]) => test(dso, symbol))?.[0] ?? "other";
        const us = (samples * usPerSample) / run.decisions;
        perDecision.set(part, (perDecision.get(part) ?? 0) + us);
        const name = dso.startsWith("[JIT]") ? "(JIT-compiled JS)" : symbol.slice(0, 100);
        bySymbol.set(name, (bySymbol.get(name) ?? 0) + us);
      }
      results[id] = { perDecision, bySymbol, decisions: run.decisions };
    } finally {
      await worker.dispose();
    }
  }
} finally {
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}

const load = rate ? `at ${rate} requests/s` : "flat out";
console.log(`user-space CPU, µs per decision (perf, cpu-clock:u), the mixed /check load ${load}:`);
const width = 50;
console.log(`${"part".padEnd(width)}${ids.map((id) => id.padStart(15)).join("")}`);
for (const [part] of PARTS) {
  const cells = ids.map((id) => (results[id]?.perDecision.get(part) ?? 0).toFixed(1).padStart(15));
  console.log(`${part.padEnd(width)}${cells.join("")}`);
}
const totals = ids.map((id) =>
  [...(results[id]?.perDecision.values() ?? [])].reduce((sum, us) => sum + us, 0),
);
console.log(`${"total".padEnd(width)}${totals.map((t) => t.toFixed(1).padStart(15)).join("")}`);
console.log(
  `${"decisions sampled".padEnd(width)}${ids.map((id) => String(results[id]?.decisions).padStart(15)).join("")}`,
);

if (diff) {
  const [a = "", b = ""] = diff;
  const more = results[a]?.bySymbol;
  const less = results[b]?.bySymbol;
  if (!more || !less) throw new Error(`--diff: give two of --with (${ids.join(", ")})`);
  const names = new Set([...more.keys(), ...less.keys()]);
  const rows = [...names]
    .map((name) => ({ name, delta: (more.get(name) ?? 0) - (less.get(name) ?? 0) }))
    .sort((x, y) => y.delta - x.delta)
    .slice(0, top);
  console.log(`\nwhere ${a} spends more than ${b}, µs per decision:`);
  for (const { name, delta } of rows) console.log(`${delta.toFixed(2).padStart(8)}  ${name}`);
}
