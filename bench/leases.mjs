// @ts-check
// `node bench/leases.mjs [--quick]`: the lease benchmark alone (bench/lib/lease-bench.mjs): a hot
// key through /check with a 20 ms store, leases on and off, and the anchor. Prints the
// bench/results.md section and writes bench/out/quick/leases.json (git-ignored). `npm run bench`
// runs the same section into bench/results.md.
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { startBridgeProcess, startPrivateRedis, tempDir } from "../tools/infra.mjs";
import { buildWorkers } from "./lib/build-workers.mjs";
import { leaseMarkdown, runLeaseBench } from "./lib/lease-bench.mjs";
import { outDir } from "./lib/output.mjs";

const quick = process.argv.includes("--quick");
const started = Date.now();
/** @param {string} message */
const progress = (message) =>
  console.log(`[leases ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${message}`);

const tmp = tempDir();
const redis = await startPrivateRedis();
const bridge = await startBridgeProcess(redis.url);
try {
  progress("building the workers (wrangler deploy --dry-run)");
  const bundles = await buildWorkers(tmp);
  const lease = await runLeaseBench({
    bridge,
    bundles,
    seconds: quick ? 4 : 8,
    repeats: quick ? 1 : 3,
    rate: 300,
    progress,
  });
  const out = outDir(true);
  mkdirSync(out, { recursive: true });
  writeFileSync(path.join(out, "leases.json"), `${JSON.stringify(lease, null, 2)}\n`);
  console.log(`\n${leaseMarkdown(lease)}`);
} finally {
  await bridge.stop();
  await redis.stop();
  rmSync(tmp, { recursive: true, force: true });
}
