// @ts-check
// Reading a V8 CPU profile (Profiler.stop's `profile`, from Node's inspector or workerd's) of a
// bundle: self time by function and by source file, the file found from the "// path" comment
// lines esbuild (and so wrangler) writes before each module of a bundle.
import { readFileSync } from "node:fs";

/**
 * @param {any} profile a V8 CPU profile
 * @param {string} bundlePath the bundle the profiled code ran from
 * @param {number} decisions what the profiled span decided (figures are per decision)
 * @returns {string} a report: the top files and functions by self time, µs per decision
 */
export function summariseProfile(profile, bundlePath, decisions) {
  const bundleName = bundlePath.split("/").pop() ?? "";
  /** @type {string[]} */
  const fileOfLine = [];
  let current = "(entry)";
  for (const line of readFileSync(bundlePath, "utf8").split("\n")) {
    const marker = /^\/\/ (\S+\.(?:ts|js|mjs|cjs))$/.exec(line);
    if (marker?.[1]) current = marker[1].replace(/^(\.\.\/)*node_modules\//, "");
    fileOfLine.push(current);
  }
  /** @type {Map<number, any>} */
  const nodes = new Map(profile.nodes.map((/** @type {any} */ n) => [n.id, n]));
  /** @type {Map<number, number>} */
  const hits = new Map();
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) {
    hits.set(samples[i], (hits.get(samples[i]) ?? 0) + (deltas[i] ?? 0));
  }
  /** @type {Map<string, number>} */
  const byFunction = new Map();
  /** @type {Map<string, number>} */
  const byFile = new Map();
  let busy = 0;
  for (const [id, us] of hits) {
    const { callFrame } = nodes.get(id);
    if (callFrame.functionName === "(idle)") continue;
    busy += us;
    const inBundle = bundleName !== "" && callFrame.url.endsWith(bundleName);
    const file = inBundle
      ? (fileOfLine[callFrame.lineNumber] ?? "?")
      : callFrame.url || `(${callFrame.functionName || "native"})`;
    const fn = `${callFrame.functionName || "(anonymous)"} ${file}${inBundle ? `:${callFrame.lineNumber + 1}` : ""}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
    byFile.set(file, (byFile.get(file) ?? 0) + us);
  }
  /** @param {Map<string, number>} map @param {number} n */
  const top = (map, n) =>
    [...map]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(
        ([k, us]) =>
          `  ${((us / busy) * 100).toFixed(1).padStart(5)} %  ${(us / decisions).toFixed(2).padStart(7)} µs  ${k}`,
      )
      .join("\n");
  return [
    `busy (not idle) ${(busy / decisions).toFixed(1)} µs sampled per decision, ${decisions} decisions`,
    "self time by source file:",
    top(byFile, 30),
    "self time by function:",
    top(byFunction, 45),
  ].join("\n");
}
