// @ts-check
// CPU of matching one request path against path-pattern rules (src/rules/match.ts): the hostile
// cases — patterns with several "*" against long paths, plain and with the separators, ";" and
// trailing dots that give a path its 16 readings (src/rules/path-readings.ts). Times
// applyingRules (readings + every pattern) in Node, the median of a few runs per case, in one
// process. Node only; no Redis.
//
//   node bench/measure/path-match.mjs [src dir, default ./src] [max ms per case, default 120000]
//
// The src dir may be an older copy of src/rules/ and src/config/ (e.g. from `git show`), to time
// the code before a change the same way.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { build } from "esbuild";

const srcDir = resolve(process.argv[2] ?? "src");
const budgetMs = Number(process.argv[3] ?? 120_000);
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-path-match-"));
const outfile = join(dir, "match.mjs");
await build({
  stdin: {
    contents: 'export * from "./rules/match"; export * from "./rules/path-readings";',
    resolveDir: srcDir,
    loader: "ts",
  },
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile,
  logLevel: "error",
});
/** @type {{ compileRules: (rules: unknown[]) => unknown[], applyingRules: (rules: unknown[], method: string, path: string) => unknown[], pathReadings: (path: string) => string[] }} */
const { compileRules, applyingRules, pathReadings } = await import(outfile);
rmSync(dir, { recursive: true, force: true });

/** A rule as parseConfig reads it (only what match.ts looks at). @param {string} path */
const rule = (path) => ({ name: "r", limit: 1, windowMs: 60_000, match: { paths: [path] } });

/**
 * A path of about `bytes` that every "*" of the pattern can stretch over and that never matches:
 * each literal segment appears again and again, the last one never. @param {number} bytes
 * @param {string[]} literals @param {boolean} hostile end in what gives the path 14 readings
 */
function spread(bytes, literals, hostile) {
  const unit = `/${literals.slice(1, -1).join("/")}`;
  const tail = hostile ? "/p//..;x/a.%2F..;y//../b." : "/x";
  let path = `/${literals[0]}`;
  while (path.length + unit.length + tail.length <= bytes) path += unit;
  return path + tail;
}

const cases = [
  { pattern: "/a/*/b/*/c/*/d", literals: ["a", "b", "c", "d"], bytes: 4_096 },
  { pattern: "/a/*/b/*/c/*/d", literals: ["a", "b", "c", "d"], bytes: 8_192 },
  { pattern: "/api/*/items/*/edit", literals: ["api", "items", "edit"], bytes: 8_192 },
  // Over MAX_MATCHED_PATH_LENGTH (8 192) once the matcher is linear: not read, it fits every rule.
  { pattern: "/api/*/items/*/edit", literals: ["api", "items", "edit"], bytes: 16_384 },
];

// Warm up (JIT) on short paths first, so the first case is not timed cold.
for (const { pattern, literals } of cases) {
  const rules = compileRules([rule(pattern)]);
  for (let i = 0; i < 200; i++) applyingRules(rules, "GET", spread(512, literals, i % 2 === 0));
}

for (const { pattern, literals, bytes } of cases) {
  for (const hostile of [false, true]) {
    const rules = compileRules([rule(pattern)]);
    const path = spread(bytes, literals, hostile);
    const runs = [];
    let matched = false;
    for (let i = 0; i < 21; i++) {
      const start = process.hrtime.bigint();
      matched = applyingRules(rules, "GET", path).length > 0;
      const ms = Number(process.hrtime.bigint() - start) / 1e6;
      runs.push(ms);
      // One slow run is the figure: the old regex can take minutes.
      if (ms * 21 > budgetMs) break;
    }
    runs.sort((a, b) => a - b);
    const median = runs[Math.floor(runs.length / 2)] ?? 0;
    console.log(
      `${pattern.padEnd(20)} ${String(path.length).padStart(6)} chars ${String(pathReadings(path).length).padStart(2)} readings ` +
        `matched=${matched} ${median.toFixed(3)} ms (median of ${runs.length})`,
    );
  }
}
