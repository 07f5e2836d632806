// @ts-check
// The benchmark's own workers (the anchor, its minimal front, the floor) built beside ours, each
// as it would deploy.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { compatibilityDate, ROOT, wranglerBundle } from "../../tools/infra.mjs";

/**
 * Builds worker/worker.ts (via wrangler.toml), bench/anchor-worker.ts (the anchor behind our /check
 * code), bench/anchor-minimal-worker.ts (the anchor behind a minimal /check front) and
 * bench/floor-worker.ts (the same store calls and nothing else), the last three via generated
 * configs with the same compatibility date.
 * @param {string} tmp
 */
export async function buildWorkers(tmp) {
  const ours = await wranglerBundle(path.join(tmp, "ours"));
  /** @param {string} name @param {string} entry */
  const benchBundle = (name, entry) => buildBenchWorker(tmp, name, entry);
  const anchor = await benchBundle("anchor", "anchor-worker.ts");
  const anchorMinimal = await benchBundle("anchor-minimal", "anchor-minimal-worker.ts");
  const floor = await benchBundle("floor", "floor-worker.ts");
  return { ours, anchor, anchorMinimal, floor };
}

/**
 * One bench-only worker (bench/<entry>) built as it would deploy, from a generated wrangler
 * config with wrangler.toml's compatibility date.
 * @param {string} tmp
 * @param {string} name e.g. "anchor"
 * @param {string} entry its file under bench/, e.g. "anchor-worker.ts"
 * @returns {Promise<string>} path of the bundled module
 */
export async function buildBenchWorker(tmp, name, entry) {
  const config = path.join(tmp, `${name}.wrangler.toml`);
  writeFileSync(
    config,
    [
      `name = "edge-limiter-bench-${name}"`,
      `main = ${JSON.stringify(path.join(ROOT, "bench", entry))}`,
      `compatibility_date = "${compatibilityDate()}"`,
      "",
    ].join("\n"),
  );
  return wranglerBundle(path.join(tmp, name), ["--config", config]);
}
