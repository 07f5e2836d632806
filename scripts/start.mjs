// @ts-check
// npm start: a Redis (REDIS_URL, the default one, or a private redis-server), the
// Upstash-compatible REST bridge in front of it (unless UPSTASH_REDIS_REST_URL and
// UPSTASH_REDIS_REST_TOKEN point elsewhere), and the worker under `wrangler dev`.
// Ctrl-C / SIGTERM stops everything it started. Node only.
//
// Environment (defaults): PORT (8787; 0 = any free port), BRIDGE_PORT (8079; 0 = any free
// port), BRIDGE_TOKEN (dev-bridge-token), REDIS_URL (redis://127.0.0.1:6379), LIMITER_TOKEN
// (dev-limiter-token), UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN (unset: use the
// bridge), LIMITER_CONFIG (JSON; unset: wrangler.toml's), ORIGIN_URL (unset: none).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, isPortOpen, portFromEnv } from "./lib/ports.mjs";
import { hasExited, spawnGroup, stopGroup } from "./lib/process-group.mjs";
import { ensureRedis, redactUrl } from "./lib/redis.mjs";

/** @typedef {import("../bridge/server.mjs").Bridge} Bridge */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const HOST = "127.0.0.1";
const READY_TIMEOUT_MS = 120_000;
const BANNER_PREFIX = "edge-limiter ready:";

const log = (/** @type {string} */ message) => console.error(`[npm start] ${message}`);

/** Things to stop on the way out, in start order (stopped in reverse). */
const resources = /** @type {{ name: string, stop: () => Promise<void> }[]} */ ([]);
/** @type {Promise<never> | undefined} */
let shuttingDown;

/**
 * Stops everything started so far (newest first) and exits with `code`. Idempotent.
 * @param {number} code
 * @returns {Promise<never>}
 */
function shutdown(code) {
  shuttingDown ??= (async () => {
    for (const resource of resources.reverse()) {
      try {
        await resource.stop();
      } catch (error) {
        log(`stopping ${resource.name} failed: ${error instanceof Error ? error.message : error}`);
      }
    }
    process.exit(code);
  })();
  return shuttingDown;
}

for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM", "SIGHUP"])) {
  process.on(signal, () => {
    if (shuttingDown) {
      log(`${signal} again: killing what is left`);
      process.exit(1); // process-group.mjs SIGKILLs any group still alive on exit.
    }
    log(`${signal}: stopping`);
    void shutdown(0);
  });
}

// `npm start` runs this under `sh -c`; npm 11 does not pass a SIGTERM it receives on to us, so
// an npm killed by a process manager would leave everything running. Watch for the parent
// going away (we get re-parented) and stop then too.
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid && !shuttingDown) {
    log(`parent process ${parentPid} exited: stopping`);
    void shutdown(0);
  }
}, 500).unref();

try {
  await main();
} catch (error) {
  log(error instanceof Error ? error.message : String(error));
  await shutdown(1);
}

async function main() {
  let port = portFromEnv("PORT", 8787);
  const bridgePort = portFromEnv("BRIDGE_PORT", 8079);
  const bridgeToken = process.env.BRIDGE_TOKEN || "dev-bridge-token";
  const limiterToken = process.env.LIMITER_TOKEN || "dev-limiter-token";
  const upstashUrl = process.env.UPSTASH_REDIS_REST_URL || undefined;
  const upstashToken = process.env.UPSTASH_REDIS_REST_TOKEN || undefined;

  if (port === 0) port = await freePort(HOST);
  else if (await isPortOpen(port, HOST)) {
    throw new Error(
      `PORT ${port} is already in use on ${HOST} (another npm start?). ` +
        "Set PORT to a free port, or PORT=0 for any free port.",
    );
  }

  /** @type {string} */
  let restUrl;
  /** @type {string} */
  let restToken;
  /** @type {string} */
  let redisNote;
  /** @type {string} */
  let bridgeNote;
  if (upstashUrl && upstashToken) {
    restUrl = upstashUrl;
    restToken = upstashToken;
    bridgeNote = `none (worker uses UPSTASH_REDIS_REST_URL ${upstashUrl})`;
    redisNote = "behind that endpoint";
  } else {
    if (upstashUrl || upstashToken) {
      log(
        "only one of UPSTASH_REDIS_REST_URL / UPSTASH_REDIS_REST_TOKEN is set; both are needed " +
          "to use an external endpoint, so the local bridge is started instead",
      );
    }
    const redis = await ensureRedis({ log });
    resources.push({ name: "redis", stop: redis.stop });
    const bridge = await startLocalBridge({
      port: bridgePort,
      token: bridgeToken,
      redisUrl: redis.url,
    });
    resources.push({ name: "bridge", stop: () => bridge.close() });
    restUrl = bridge.url;
    restToken = bridgeToken;
    bridgeNote = bridge.url;
    redisNote = `${redactUrl(redis.url)}${redis.started ? " (private redis-server)" : ""}`;
  }

  const workerUrl = await startWrangler({
    port,
    vars: {
      UPSTASH_REDIS_REST_URL: restUrl,
      UPSTASH_REDIS_REST_TOKEN: restToken,
      LIMITER_TOKEN: limiterToken,
      LIMITER_CONFIG: process.env.LIMITER_CONFIG || undefined,
      ORIGIN_URL: process.env.ORIGIN_URL || undefined,
    },
  });

  const problem = await configProblem(workerUrl, limiterToken);
  if (problem) log(`warning: the worker refuses to limit anything (503): ${problem}`);

  const sample =
    `curl -s -X POST ${workerUrl}/check -H 'Authorization: Bearer ${limiterToken}' ` +
    `-H 'Content-Type: application/json' -d '{"key":"demo","limit":100,"window":"1m"}'`;
  console.log(
    `${BANNER_PREFIX} worker ${workerUrl} | bridge ${bridgeNote} | redis ${redisNote} | ` +
      `LIMITER_TOKEN ${limiterToken} | try: ${sample}`,
  );
}

/**
 * Starts bridge/server.mjs in this process.
 * @param {{ port: number, token: string, redisUrl: string }} options
 * @returns {Promise<Bridge>}
 */
async function startLocalBridge({ port, token, redisUrl }) {
  // Loaded only when needed: with UPSTASH_REDIS_REST_URL/_TOKEN set, npm start never touches it.
  const { startBridge } = await import("../bridge/server.mjs");
  try {
    return await startBridge({
      host: HOST,
      port,
      token,
      redisUrl,
      log: (line) => console.error(`[bridge] ${line}`),
    });
  } catch (error) {
    const err = /** @type {NodeJS.ErrnoException & { cause?: NodeJS.ErrnoException }} */ (error);
    if (err?.code === "EADDRINUSE" || err?.cause?.code === "EADDRINUSE") {
      throw new Error(
        `BRIDGE_PORT ${port} is already in use on ${HOST}. Set BRIDGE_PORT to a free port ` +
          "(0 = any), or point UPSTASH_REDIS_REST_URL/UPSTASH_REDIS_REST_TOKEN at the bridge " +
          "that is already running there.",
      );
    }
    throw error;
  }
}

/**
 * Runs `wrangler dev` in its own process group (stopped as a whole on the way out), with the
 * given vars (`--var KEY:VALUE`: wrangler splits at the first colon only, so URLs and JSON
 * pass unchanged; --var wins over wrangler.toml [vars] and .dev.vars). Resolves with the
 * worker's URL once it answers HTTP.
 * @param {{ port: number, vars: Record<string, string | undefined> }} options
 * @returns {Promise<string>}
 */
async function startWrangler({ port, vars }) {
  const inspectorPort = await freePort(HOST);
  const persistDir = mkdtempSync(path.join(tmpdir(), "edge-limiter-wrangler-"));
  resources.push({
    name: "wrangler state",
    stop: async () => rmSync(persistDir, { recursive: true, force: true }),
  });

  const args = [
    "dev",
    "--ip",
    HOST,
    "--port",
    String(port),
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    persistDir,
    "--show-interactive-dev-session=false",
  ];
  for (const [key, value] of Object.entries(vars)) {
    if (value !== undefined) args.push("--var", `${key}:${value}`);
  }

  const wrangler = spawnGroup(path.join(ROOT, "node_modules", ".bin", "wrangler"), args, {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      WRANGLER_SEND_METRICS: "false",
      ...(process.stdout.isTTY && !process.env.NO_COLOR ? { FORCE_COLOR: "1" } : {}),
    },
  });
  resources.push({ name: "wrangler", stop: () => stopGroup(wrangler, { graceMs: 5000 }) });

  let workerUrl = `http://${HOST}:${port}`;
  let announced = false;
  let tail = "";
  /** @param {Buffer} chunk */
  const watch = (chunk) => {
    tail = (tail + stripAnsi(chunk.toString("utf8"))).slice(-2000);
    const ready = /Ready on (http:\/\/\S+)/.exec(tail);
    if (ready?.[1] && !announced) {
      announced = true;
      const url = ready[1].replace(/\/$/, "");
      if (url !== workerUrl) log(`wrangler serves on ${url}, not ${workerUrl}`);
      workerUrl = url;
    }
  };
  wrangler.stdout?.on("data", (chunk) => {
    process.stdout.write(chunk);
    watch(chunk);
  });
  wrangler.stderr?.on("data", (chunk) => {
    process.stderr.write(chunk);
    watch(chunk);
  });

  const exited = new Promise((resolve) => {
    wrangler.once("error", (error) =>
      resolve(`could not run wrangler: ${error.message} (run \`npm ci\` first?)`),
    );
    wrangler.once("exit", (code, signal) =>
      resolve(`wrangler exited (${signal ?? `code ${code}`})`),
    );
  });
  void exited.then((reason) => {
    if (shuttingDown) return;
    log(`${reason}; stopping`);
    void shutdown(wrangler.exitCode || 1);
  });

  const deadline = Date.now() + READY_TIMEOUT_MS;
  // Probe a route the worker answers itself (GET /check: 405): `/` would go through the proxy to
  // the origin and count against any rule that matches it.
  while (!(announced && (await answersHttp(`${workerUrl}/check`)))) {
    if (shuttingDown || hasExited(wrangler)) await new Promise(() => {}); // shutdown() exits
    if (Date.now() > deadline) {
      throw new Error(
        `wrangler dev did not answer on ${workerUrl} within ${READY_TIMEOUT_MS / 1000} s`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return workerUrl;
}

/**
 * The worker's own verdict on its configuration, without counting anything: an authorized
 * /check with an empty body is a 400 when the config is valid, a 503 naming the problem when not.
 * @param {string} workerUrl
 * @param {string} token
 * @returns {Promise<string | undefined>}
 */
async function configProblem(workerUrl, token) {
  try {
    const res = await fetch(`${workerUrl}/check`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}",
      signal: AbortSignal.timeout(5000),
    });
    const body = /** @type {{ detail?: string }} */ (await res.json().catch(() => ({})));
    return res.status === 503 ? (body.detail ?? "misconfigured") : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether anything answers HTTP at `url` (any status).
 * @param {string} url
 */
async function answersHttp(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.body?.cancel();
    return true;
  } catch {
    return false;
  }
}

/** @param {string} text */
function stripAnsi(text) {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences
  return text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "");
}
