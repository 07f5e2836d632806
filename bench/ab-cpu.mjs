// @ts-check
// A/B of workerd CPU per /check decision (issue 12): a few workers side by side, each in its own
// workerd process, the mixed /check load on each in turn (A B…, then …B A), `--reps` times;
// the CPU time of each process (bench/lib/workerd-cpu.mjs, to the ns) over its decisions, and
// the paired median of each worker's ratio to the first. Quicker than `npm run bench -- --only=cpu`
// for one change: two workers, no profiles.
//
//   node bench/ab-cpu.mjs [--ref=<name>=<git ref>]… [--bundle=<name>=<path.js>]…
//     [--with=ours,anchorMinimal,floor] [--rate=N] [--seconds=S] [--reps=R]
//
// --ref builds src/worker.ts as it was at that ref (git archive, this checkout's node_modules);
// --bundle serves a bundle built elsewhere; --with adds this checkout's workers (ours as
// deployed, the minimal anchor, the floor). --rate=N offers N requests/s (default: flat out,
// where throughput is reported too). Defaults: 2 s slices at a rate, 4 s flat out; 8 reps.
import { rmSync } from "node:fs";
import { median } from "./lib/cpu-section.mjs";
import {
  buildBaseline,
  buildWorkers,
  serveWorker,
  startBridgeProcess,
  startPrivateRedis,
  tempDir,
} from "./lib/infra.mjs";
import { LIMITER_TOKEN, runLoad } from "./lib/load.mjs";
import { withWorkerdCpu } from "./lib/workerd-cpu.mjs";

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
  const worker = await serveWorker({
    scriptPath: c.scriptPath,
    bindings: {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
      LIMITER_TOKEN,
      ...(c.ours ? { LIMITER_CONFIG: OURS_CONFIG } : {}),
    },
  });
  served.push({ ...c, ...worker, runs: /** @type {any[]} */ ([]) });
}
try {
  /** @param {typeof served[number]} w @param {string} tag @param {number} s */
  const once = (w, tag, s) =>
    withWorkerdCpu(w.pid, () =>
      runLoad({
        url: w.url,
        load: "mixed",
        tag,
        seconds: s,
        connections: 32,
        ...(rate ? { rate } : {}),
      }),
    );
  for (const w of served) await once(w, `abw${w.id}${Date.now()}`, 1);
  for (let rep = 0; rep < reps; rep++) {
    for (const w of rep % 2 === 0 ? served : [...served].reverse()) {
      const run = await once(w, `ab${rep}${w.id}${Date.now()}`, seconds);
      w.runs.push(run);
      console.log(
        `rep ${rep + 1}/${reps} ${w.id.padEnd(14)} ${run.cpuUsecPerDecision.toFixed(0)} µs/decision, ` +
          `${run.perSecond.toFixed(0)} decisions/s, errors ${run.errors}`,
      );
    }
  }
  const [first] = served;
  console.log(`\n${rate ? `at ${rate}/s` : "flat out"}, ${reps} reps of ${seconds} s, medians:`);
  for (const w of served) {
    const paired = (/** @type {string} */ field) =>
      median(w.runs.map((r, i) => r[field] / (first?.runs[i]?.[field] ?? Number.NaN)));
    console.log(
      `${w.id.padEnd(14)} ${median(w.runs.map((r) => r.cpuUsecPerDecision)).toFixed(0)} µs/decision` +
        (w === first
          ? ""
          : `, ÷ ${first?.id}: CPU ${paired("cpuUsecPerDecision").toFixed(3)}×` +
            (rate ? "" : `, throughput ${paired("perSecond").toFixed(3)}×`)),
    );
  }
} finally {
  for (const w of served) await w.dispose();
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
