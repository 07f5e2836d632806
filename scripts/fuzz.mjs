// @ts-check
// npm run fuzz -- --minutes=30: the model-based test of every feature at once
// (test/e2e/model-all-features.test.ts) run again and again with random seeds until the time is
// up. Prints each seed with its runs, operations and violations, then the totals; a failing
// seed's line is ready to keep in test/e2e/model/kept-seeds.json (the short test replays it).
// Options: --minutes=N (default 30), --runs=N runs a seed (default 40), --steps=N (default 40),
// --seed=N (first seed; the next ones count up from it). MODEL_OFF / MODEL_ON pass through.
// Exits 1 when any seed failed. Node only.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureRedis } from "../tools/redis.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TEST = "test/e2e/model-all-features.test.ts";

/** @param {string} name @param {number} fallback */
function option(name, fallback) {
  const raw = process.argv.slice(2).find((arg) => arg.startsWith(`--${name}=`));
  if (raw === undefined) return fallback;
  const value = Number(raw.slice(name.length + 3));
  if (!Number.isFinite(value) || value < 0) {
    console.error(`--${name} takes a number ≥ 0, got ${raw}`);
    process.exit(2);
  }
  return value;
}

const minutes = option("minutes", 30);
const runs = option("runs", 40);
const steps = option("steps", 40);
let seed = option("seed", Math.floor(Math.random() * 2 ** 31));

const redis = await ensureRedis({ log: (m) => console.error(`[fuzz] ${m}`) });
const dir = mkdtempSync(path.join(tmpdir(), "edge-limiter-fuzz-"));
const until = Date.now() + minutes * 60_000;
const totals = { seeds: 0, runs: 0, operations: 0, violations: 0 };
/** @type {any[]} */
const failures = [];

/** @param {number} s @returns {Promise<any>} */
function runSeed(s) {
  const report = path.join(dir, `${s}.json`);
  return new Promise((resolve) => {
    const child = spawn(
      path.join(root, "node_modules", ".bin", "vitest"),
      ["run", "--project", "node", TEST, "-t", "holds every promise"],
      {
        cwd: root,
        stdio: ["ignore", "ignore", "ignore"],
        env: {
          ...process.env,
          REDIS_URL: redis.url,
          MODEL_SEED: String(s),
          MODEL_RUNS: String(runs),
          MODEL_STEPS: String(steps),
          MODEL_REPORT: report,
        },
      },
    );
    child.once("exit", (code) => {
      try {
        resolve(JSON.parse(readFileSync(report, "utf8")));
      } catch {
        resolve({
          seed: s,
          numRuns: 0,
          operations: 0,
          failed: true,
          property: `vitest exited ${code} with no report`,
        });
      }
    });
  });
}

console.log(`fuzz: ${minutes} min, ${runs} runs of ≤ ${steps} steps a seed, from seed ${seed}`);
do {
  const report = await runSeed(seed);
  totals.seeds++;
  totals.runs += report.numRuns;
  totals.operations += report.operations;
  if (report.failed) {
    totals.violations++;
    failures.push(report);
    console.log(
      `seed ${seed}: ${report.numRuns} runs, ${report.operations} operations, VIOLATION ${report.property}\n` +
        `  ${report.message}\n` +
        `  keep: ${JSON.stringify({ seed, config: report.config, steps: report.steps, needs: [], note: report.property })}`,
    );
  } else {
    console.log(
      `seed ${seed}: ${report.numRuns} runs, ${report.operations} operations, 0 violations`,
    );
  }
  seed++;
} while (Date.now() < until);

console.log(
  `fuzz: ${totals.seeds} seeds, ${totals.runs} runs, ${totals.operations} operations, ${totals.violations} violations` +
    (failures.length ? ` (seeds ${failures.map((f) => f.seed).join(", ")})` : ""),
);
rmSync(dir, { recursive: true, force: true });
await redis.stop();
process.exit(totals.violations > 0 ? 1 : 0);
