// @ts-check
// A/B of workerd CPU per /check decision: a few workers side by side, each in its own
// workerd process, the mixed /check load on each in turn (A B…, then …B A), `--reps` times;
// the CPU time of each process (bench/lib/workerd-cpu.mjs, to the ns) over its decisions, and
// the paired median of each worker's ratio to the first. Quicker than `npm run bench -- --only=cpu`
// for one change: two workers, no profiles.
//
//   node bench/ab-cpu.mjs [--ref=<name>=<git ref>]… [--bundle=<name>=<path.js>]…
//     [--with=ours,anchorMinimal,floor] [--rate=N] [--seconds=S] [--reps=R]
//
// --ref builds worker/worker.ts as it was at that ref (git archive, this checkout's node_modules);
// --bundle serves a bundle built elsewhere; --with adds this checkout's workers (ours as
// deployed, the minimal anchor, the floor). --rate=N offers N requests/s (default: flat out,
// where throughput is reported too). Defaults: 2 s slices at a rate, 4 s flat out; 8 reps.
import { rmSync } from "node:fs";
import {
  buildBaseline,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
} from "../tools/infra.mjs";
import { buildWorkers } from "./lib/build-workers.mjs";
import { measureWorkerdCpu, median } from "./lib/cpu-section.mjs";
import { LIMITER_TOKEN } from "./lib/load.mjs";

/** @param {string} name */
const option = (name) =>
  process.argv.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
const rate = Number(option("rate")[0]) || undefined;
const seconds = Number(option("seconds")[0]) || (rate ? 2 : 4);
const reps = Number(option("reps")[0]) || 8;
const withIds = (option("with")[0] ?? "").split(",").filter(Boolean);
const OURS_CONFIG = JSON.stringify({ rules: [], timeoutMs: 500, failMode: "open" });

const tmp = tempDir();
/** @type {{ id: string, scriptPath: string, ours: boolean }[]} */
const contenders = [];
for (const spec of option("ref")) {
  const [id = "", ref = ""] = spec.split("=");
  contenders.push({ id, scriptPath: await buildBaseline(`${tmp}/${id}`, ref), ours: true });
}
for (const spec of option("bundle")) {
  const [id = "", scriptPath = ""] = spec.split("=");
  contenders.push({ id, scriptPath, ours: true });
}
if (withIds.length > 0) {
  const built = /** @type {Record<string, string>} */ (await buildWorkers(tmp));
  for (const id of withIds) {
    const scriptPath = built[id];
    if (!scriptPath) throw new Error(`--with: no worker ${id} (ours, anchorMinimal, floor)`);
    contenders.push({ id, scriptPath, ours: id === "ours" });
  }
}
if (contenders.length < 2) throw new Error("give two workers or more (--ref, --bundle, --with)");

const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
const served = [];
for (const c of contenders) {
  const bindings = {
    UPSTASH_REDIS_REST_URL: bridge.url,
    UPSTASH_REDIS_REST_TOKEN: bridge.token,
    LIMITER_TOKEN,
    ...(c.ours ? { LIMITER_CONFIG: OURS_CONFIG } : {}),
  };
  const worker = await serveWorker({ scriptPath: c.scriptPath, bindings });
  served.push({ ...c, ...worker });
}
try {
  // The CPU section's own alternation (bench/lib/cpu-section.mjs): rotations at a rate, or
  // flat-out repeats, over these workers only.
  const result = await measureWorkerdCpu({
    workers: Object.fromEntries(served.map((w) => [w.id, w])),
    ids: served.map((w) => w.id),
    repeats: rate ? 0 : reps,
    rotations: rate ? reps : 0,
    seconds,
    sliceSeconds: seconds,
    connections: 32,
    rate: rate ?? 0,
    progress: console.log,
  });
  const mode = rate ? "fixed" : "max";
  /** @param {string} id */
  const runsOf = (id) => /** @type {any[]} */ (result.byId[id]?.[mode].runs ?? []);
  const first = served[0]?.id ?? "";
  console.log(`\n${rate ? `at ${rate}/s` : "flat out"}, ${reps} reps of ${seconds} s, medians:`);
  for (const { id } of served) {
    const paired = (/** @type {string} */ field) =>
      median(runsOf(id).map((r, i) => r[field] / (runsOf(first)[i]?.[field] ?? Number.NaN)));
    console.log(
      `${id.padEnd(14)} ${result.byId[id]?.[mode].cpuUsecPerDecision.toFixed(0)} µs/decision` +
        (id === first
          ? ""
          : `, ÷ ${first}: CPU ${paired("cpuUsecPerDecision").toFixed(3)}×` +
            (rate ? "" : `, throughput ${paired("perSecond").toFixed(3)}×`)),
    );
  }
} finally {
  for (const w of served) await w.dispose();
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
