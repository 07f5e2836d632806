// @ts-check
// Reading a V8 CPU profile (Profiler.stop's `profile`, from Node's inspector or workerd's) of a
// bundle: self time by function and by source file, the file found from the "// path" comment
// lines esbuild (and so wrangler) writes before each module of a bundle.
import { readFileSync } from "node:fs";
import { fromMiniflare } from "../../tools/wrangler-deps.mjs";

// The WebSocket client Miniflare itself depends on (Node 20 has no global WebSocket).
/** @type {any} */
const WebSocket = fromMiniflare("ws");

/**
 * A V8 CPU profile of a workerd process (served with `inspectorPort`) while `load` runs.
 * @template T
 * @param {number} inspectorPort
 * @param {() => Promise<T>} load
 * @returns {Promise<{ profile: any, result: T }>}
 */
export async function profileWorkerd(inspectorPort, load) {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((/** @type {any} */ t) => t.webSocketDebuggerUrl) ?? targets[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let id = 0;
  /** @type {Map<number, (value: any) => void>} */
  const waiting = new Map();
  ws.on("message", (/** @type {Buffer} */ data) => {
    const message = JSON.parse(String(data));
    if (message.id !== undefined) waiting.get(message.id)?.(message.result);
  });
  /** @param {string} method @param {object} [params] @returns {Promise<any>} */
  const post = (method, params = {}) =>
    new Promise((resolve) => {
      const n = ++id;
      waiting.set(n, resolve);
      ws.send(JSON.stringify({ id: n, method, params }));
    });
  try {
    await post("Profiler.enable");
    await post("Profiler.setSamplingInterval", { interval: 100 });
    await post("Profiler.start");
    const result = await load();
    const { profile } = await post("Profiler.stop");
    return { profile, result };
  } finally {
    ws.close();
  }
}

/**
 * Where a worker's CPU goes, by part (shares of the sampled busy time): workerd's own native
 * work, V8 (program, GC), each library, each src/ layer.
 * @param {any} profile
 * @param {string} bundlePath
 * @returns {Record<string, number>} part → share (0..1)
 */
export function cpuByPart(profile, bundlePath) {
  const { byFile, busy } = selfTimes(profile, bundlePath);
  /** @type {Record<string, number>} */
  const parts = {};
  for (const [file, us] of byFile) {
    const part = partOf(file);
    parts[part] = (parts[part] ?? 0) + us / busy;
  }
  return parts;
}

/** @param {string} file a bundle's module path, or "(name)" for code outside the bundle */
function partOf(file) {
  if (file === "((program))") return "V8: (program)";
  if (file === "((garbage collector))") return "V8: garbage collector";
  if (file.startsWith("(")) return "workerd's own (fetch, Request, Response, bodies, timers)";
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(`node_modules/${file}`)?.[1];
  if (file.includes("bench/")) return "the anchor's front (bench/*.ts)";
  const src = /(?:^|\/)src\/(?:([^/]+)\/)?[^/]+\.ts$/.exec(file);
  if (src) return src[1] ? `src/${src[1]}/` : "src/*.ts (worker, runtime)";
  return pkg ?? "other";
}

/**
 * @param {any} profile a V8 CPU profile
 * @param {string} bundlePath the bundle the profiled code ran from
 * @param {number} decisions what the profiled span decided (figures are per decision)
 * @returns {string} a report: the top files and functions by self time, µs per decision
 */
export function summariseProfile(profile, bundlePath, decisions) {
  const { byFile, byFunction, busy } = selfTimes(profile, bundlePath);
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

/**
 * Self time (µs, idle excluded) by source file and by function.
 * @param {any} profile
 * @param {string} bundlePath
 */
function selfTimes(profile, bundlePath) {
  const bundleName = bundlePath.split("/").pop() ?? "";
  /** @type {string[]} */
  const fileOfLine = [];
  let current = "(entry)";
  for (const line of readFileSync(bundlePath, "utf8").split("\n")) {
    const marker = /^\/\/ (\S+\.(?:ts|js|mjs|cjs))$/.exec(line);
    if (marker?.[1]) current = marker[1].replace(/^.*node_modules\//, "");
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
  return { byFile, byFunction, busy };
}
