// @ts-check
// What the benchmark and the end-to-end tests run on: a private redis-server, the project's REST
// bridge in its own process, the worker built as it deploys and served by workerd
// (serve-workerd.mjs).
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./ports.mjs";
import { spawnUntil, stopGroup } from "./process-group.mjs";
import { startPrivateRedis as startRedisServer } from "./redis.mjs";
import { serveWithWorkerd } from "./serve-workerd.mjs";

export const ROOT = path.resolve(import.meta.dirname, "..");

/** @param {number} ms */
export const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A private redis-server on a free port (never the shared 6379: INFO commandstats deltas and
 * MEMORY USAGE must see only our traffic). No persistence. The one `npm test` starts too.
 * @returns {Promise<{ url: string, port: number, stop: () => Promise<void> }>}
 */
export async function startPrivateRedis() {
  const redis = await startRedisServer();
  return { url: redis.url, port: Number(new URL(redis.url).port), stop: redis.stop };
}

/**
 * The project's Upstash REST bridge (`npm run bridge`) in a child process, so its event loop
 * does not compete with the load generator's.
 * @param {string} redisUrl
 * @param {{ maxCommandsPerSecond?: number }} [options] its BRIDGE_MAX_COMMANDS_PER_SECOND (none:
 *   no cap)
 * @returns {Promise<{ url: string, token: string, stop: () => Promise<void> }>}
 */
export async function startBridgeProcess(redisUrl, { maxCommandsPerSecond } = {}) {
  const port = await freePort();
  const token = "bench-bridge-token";
  /** @type {NodeJS.ProcessEnv} */
  const env = {
    ...process.env,
    BRIDGE_PORT: String(port),
    BRIDGE_TOKEN: token,
    REDIS_URL: redisUrl,
  };
  delete env.BRIDGE_MAX_COMMANDS_PER_SECOND; // the caller's shell decides nothing here
  if (maxCommandsPerSecond !== undefined) {
    env.BRIDGE_MAX_COMMANDS_PER_SECOND = String(maxCommandsPerSecond);
  }
  const { child } = await spawnUntil(
    "the bridge",
    process.execPath,
    [path.join(ROOT, "bridge", "main.mjs")],
    /bridge on/i,
    { env },
  );
  return { url: `http://127.0.0.1:${port}`, token, stop: () => stopGroup(child) };
}

/**
 * Builds a worker exactly as `wrangler deploy` would, without deploying.
 * @param {string} outdir
 * @param {string[]} args extra wrangler arguments (e.g. --config)
 * @param {string} [cwd] the project to build (default: this one)
 * @returns {Promise<string>} path of the bundled module
 */
export async function wranglerBundle(outdir, args = [], cwd = ROOT) {
  const wrangler = path.join(ROOT, "node_modules", ".bin", "wrangler");
  const child = spawn(wrangler, ["deploy", "--dry-run", "--outdir", outdir, ...args], {
    cwd,
    env: { ...process.env, WRANGLER_SEND_METRICS: "false", CI: "true" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise((resolve) => child.once("exit", resolve));
  if (code !== 0) throw new Error(`wrangler deploy --dry-run failed:\n${output}`);
  // The bundle is named after the entry (worker.js, anchor-worker.js).
  const bundle = readdirSync(outdir).find((file) => file.endsWith(".js"));
  if (!bundle) throw new Error(`wrangler deploy --dry-run left no .js bundle in ${outdir}`);
  return path.join(outdir, bundle);
}

/** The compatibility date of wrangler.toml, so both workers run with the same one. */
export function compatibilityDate() {
  const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  return /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)?.[1] ?? "2026-11-10";
}

/** The compatibility flags of wrangler.toml, so a worker served by workerd alone runs with them. */
export function compatibilityFlags() {
  const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  const list = /^compatibility_flags\s*=\s*\[([^\]]*)\]/m.exec(toml)?.[1] ?? "";
  return [...list.matchAll(/"([^"]+)"/g)].map((match) => /** @type {string} */ (match[1]));
}

/**
 * worker/worker.ts as it was at a git ref (`npm run bench -- --baseline=<ref>`: before and after a
 * change in one run), built from `git archive <ref>` with this checkout's node_modules.
 * @param {string} tmp
 * @param {string} ref
 */
export async function buildBaseline(tmp, ref) {
  const tree = path.join(tmp, "baseline-tree");
  mkdirSync(tree, { recursive: true });
  execFileSync("sh", ["-c", `git archive "$1" | tar -x -C "$2"`, "sh", ref, tree], { cwd: ROOT });
  symlinkSync(path.join(ROOT, "node_modules"), path.join(tree, "node_modules"));
  return wranglerBundle(path.join(tmp, "baseline"), [], tree);
}

export function tempDir() {
  return mkdtempSync(path.join(tmpdir(), "edge-limiter-bench-"));
}

/**
 * One worker served by workerd alone on its own port (serve-workerd.mjs), as the edge runs it.
 * @param {{ scriptPath: string, bindings: Record<string, string>, inspector?: boolean, v8Flags?: string[] }} options
 *   inspector: workerd's V8 inspector on too, its port returned (profiling only); v8Flags: V8's
 *   flags for the process (serve-workerd.mjs)
 * @returns {Promise<{ url: string, pid: number | undefined, inspectorPort: number | undefined, dispose: () => Promise<void> }>}
 */
export async function serveWorker({ scriptPath, bindings, inspector, v8Flags }) {
  return serveWithWorkerd({
    scriptPath,
    bindings,
    inspector,
    v8Flags,
    compatibilityDate: compatibilityDate(),
    compatibilityFlags: compatibilityFlags(),
  });
}
