// @ts-check
// Where the bench writes. The one committed report is bench/results.md (with the SVGs it
// embeds): every figure is said there once. Raw JSON and the per-section Markdown go to bench/out/
// (git-ignored; --quick into bench/out/quick/), where bench/shards.mjs --faults also reads back
// the throughput section it keeps.
//
// The full run measures most sections; five run alone, with their own databases and builds
// (`npm run bench -- --only=<name>`). bench/results.md keeps each of those as a block between
// markers, so a full run rewrites its own sections and keeps the others' last figures, and a
// section run alone replaces only its block.
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import path from "node:path";
import { ROOT } from "../../tools/infra.mjs";

const BENCH = path.join(ROOT, "bench");
/** The git-ignored folder of raw output. */
const OUT = path.join(BENCH, "out");

/** @param {boolean} quick */
export const outDir = (quick) => (quick ? path.join(OUT, "quick") : OUT);

/** The report a run updates: the committed one, or a quick run's beside its output. */
const reportPath = (/** @type {boolean} */ quick) =>
  quick ? path.join(outDir(true), "results.md") : path.join(BENCH, "results.md");

/** The sections that run alone, in their order at the end of the report, with their headings. */
export const ALONE_SECTIONS = /** @type {const} */ ({
  "limit-change": "Limit change",
  "regions-slow": "Regions: a slow region",
  shards: "Shards",
  concurrency: "Concurrency limits",
  usage: "Usage limits",
});

/** @param {string} name */
const begin = (name) => `<!-- section ${name}: npm run bench -- --only=${name} -->`;
/** @param {string} name */
const end = (name) => `<!-- /section ${name} -->`;

/**
 * The blocks of the alone sections found in a report.
 * @param {string} text
 * @returns {Map<string, string>}
 */
function blocksOf(text) {
  const blocks = new Map();
  for (const name of Object.keys(ALONE_SECTIONS)) {
    const from = text.indexOf(begin(name));
    const to = text.indexOf(end(name));
    if (from >= 0 && to > from) blocks.set(name, text.slice(from, to + end(name).length));
  }
  return blocks;
}

/** @param {string} file */
const readIfThere = (file) => (existsSync(file) ? readFileSync(file, "utf8") : "");

/**
 * The report's text before its first alone block (the full run's sections).
 * @param {string} text
 */
function mainOf(text) {
  const first = Math.min(
    ...Object.keys(ALONE_SECTIONS)
      .map((name) => text.indexOf(begin(name)))
      .filter((i) => i >= 0),
    text.length,
  );
  return text.slice(0, first).trimEnd();
}

/**
 * Writes the report: `main` (or the report's own when undefined) then every alone block, each
 * from `blocks` or kept as the report holds it.
 * @param {boolean} quick
 * @param {string | undefined} main
 * @param {Map<string, string>} blocks
 */
function writeReportFile(quick, main, blocks) {
  const file = reportPath(quick);
  const current = readIfThere(file);
  const kept = blocksOf(current);
  const parts = [main ?? mainOf(current)];
  for (const name of Object.keys(ALONE_SECTIONS)) {
    const block = blocks.get(name) ?? kept.get(name);
    if (block) parts.push(block);
  }
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${parts.filter(Boolean).join("\n\n")}\n`);
  return path.relative(ROOT, file);
}

/**
 * After a full or quick run wrote <outDir>/results.md and its charts: the report gets those
 * sections (and a full run's charts go beside bench/results.md), keeping the alone blocks.
 * @param {boolean} quick
 */
export function publishMain(quick) {
  const dir = outDir(quick);
  if (!quick) {
    for (const file of readdirSync(dir).filter((f) => f.endsWith(".svg"))) {
      copyFileSync(path.join(dir, file), path.join(BENCH, file));
    }
  }
  if (quick) return path.relative(ROOT, reportPath(true));
  return writeReportFile(
    false,
    readFileSync(path.join(dir, "results.md"), "utf8").trimEnd(),
    new Map(),
  );
}

/**
 * After a section that runs alone wrote <outDir>/<name>.md ("# edge-limiter <name> benchmark",
 * the command line, its figures): its block in the report, headed as the report heads it.
 * @param {boolean} quick
 * @param {keyof typeof ALONE_SECTIONS} name
 */
export function publishAlone(quick, name) {
  const lines = readFileSync(path.join(outDir(quick), `${name}.md`), "utf8")
    .trimEnd()
    .split("\n");
  // Its own title goes; its headings go one level down when it has second-level ones.
  const body = lines.slice(lines[0]?.startsWith("# ") ? 1 : 0);
  const deeper = body.some((line) => line.startsWith("## "));
  const text = body.map((line) => (deeper && /^#{2,5} /.test(line) ? `#${line}` : line)).join("\n");
  const block = [begin(name), `## ${ALONE_SECTIONS[name]}`, text.trim(), end(name)].join("\n\n");
  return writeReportFile(quick, undefined, new Map([[name, block]]));
}
