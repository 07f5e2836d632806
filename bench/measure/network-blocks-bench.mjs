// @ts-check
// An isolate's copy of the network blocks at their cap (src/net/network-blocks.ts): the heap it
// retains, the time to build it from a read, and the time one request's match takes, for the worst
// spread the cap allows (10 000 CIDRs over every IPv4 length 1-32 and IPv6 length 1-128, so a
// request looks up one network per length of its family). Also the bytes of the read itself (what
// each refresh carries from the store). Node only; no Redis.
//
//   node --expose-gc bench/measure/network-blocks-bench.mjs [src dir, default ./src]
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { build } from "esbuild";

const srcDir = resolve(process.argv[2] ?? "src");
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-network-blocks-"));
const outfile = join(dir, "blocks.mjs");
await build({
  stdin: {
    contents:
      'export * from "./rules/network-blocks"; export * from "./rules/network-values"; export { MAX_NETWORK_BLOCKS } from "./store/plans";',
    resolveDir: srcDir,
    loader: "ts",
  },
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile,
  logLevel: "error",
});
const { createNetworkBlocks, normalizeNetwork, MAX_NETWORK_BLOCKS } = await import(outfile);
rmSync(dir, { recursive: true, force: true });

const gc = /** @type {(() => void) | undefined} */ (globalThis.gc);
if (!gc) throw new Error("run with node --expose-gc");

/** 10 000 distinct CIDRs, every length of both families present, as the store holds them. */
function entries() {
  /** @type {{ field: string, value: string }[]} */
  const out = [];
  const seen = new Set();
  let i = 0;
  while (out.length < MAX_NETWORK_BLOCKS) {
    const v6 = i % 2 === 1;
    const length = v6 ? 1 + (i % 128) : 1 + (i % 32);
    const n = Math.floor(i / 2);
    const text = v6
      ? `2001:${(n % 65536).toString(16)}:${(n >> 4).toString(16)}::${(i & 0xffff).toString(16)}/${length}`
      : `${1 + (n % 223)}.${(n >> 3) % 256}.${n % 256}.${i % 256}/${length}`;
    const value = normalizeNetwork(text);
    i++;
    if (value === undefined) continue;
    const field = `ip|*|${value}`;
    if (seen.has(field)) continue;
    seen.add(field);
    out.push({ field, value: "0" });
  }
  return out;
}

const read = entries();
const readBytes = read.reduce((sum, e) => sum + e.field.length + e.value.length, 0);
gc();
const before = process.memoryUsage().heapUsed;
const blocks = createNetworkBlocks({
  load: async () => ({ now: Date.now(), entries: read }),
  refreshMs: 60_000,
});
const builtAt = performance.now();
await blocks.match({ ip: "192.0.2.1" }, ["r"]);
const buildMs = performance.now() - builtAt;
gc();
const retained = process.memoryUsage().heapUsed - before;

/** The median µs of one match, over many requests from `ip`. @param {string} ip */
async function matchMicros(ip) {
  const runs = [];
  for (let r = 0; r < 7; r++) {
    const n = 2_000;
    const start = performance.now();
    for (let k = 0; k < n; k++) await blocks.match({ ip, country: "DE", asn: 64_496 }, ["r"]);
    runs.push(((performance.now() - start) * 1000) / n);
  }
  return runs.sort((a, b) => a - b)[3] ?? 0;
}

console.log(`network blocks in the copy: ${blocks.size} (cap ${MAX_NETWORK_BLOCKS})`);
console.log(`a read's fields and values: ${(readBytes / 1024).toFixed(0)} KiB`);
console.log(`heap retained by the copy: ${(retained / 1024 / 1024).toFixed(2)} MiB`);
console.log(`first load + match: ${buildMs.toFixed(1)} ms`);
console.log(`one match, IPv4 (32 lengths): ${(await matchMicros("198.51.100.7")).toFixed(1)} µs`);
console.log(
  `one match, IPv6 (128 lengths): ${(await matchMicros("2a00:1450:4001::1")).toFixed(1)} µs`,
);
