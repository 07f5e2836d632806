// @ts-check
// npm start: a Redis (REDIS_URL, the default one, or a private redis-server), the
// Upstash-compatible REST bridge in front of it (unless UPSTASH_REDIS_REST_URL and
// UPSTASH_REDIS_REST_TOKEN point elsewhere), and the worker under `wrangler dev`.
// Ctrl-C / SIGTERM stops everything it started. Node only.
//
// Environment (defaults): PORT (8787; 0 = any free port), BRIDGE_PORT (8079; 0 = any free
// port), BRIDGE_TOKEN (dev-bridge-token), REDIS_URL (redis://127.0.0.1:6379), LIMITER_TOKEN
// (dev-limiter-token), LIMITER_ADMIN_TOKEN (dev-admin-token: the admin routes' token),
// UPSTASH_REDIS_REST_URL + UPSTASH_REDIS_REST_TOKEN (unset: use the bridge), LIMITER_CONFIG
// (JSON; unset: wrangler.toml's), ORIGIN_URL (unset: none), LIMITER_ANALYTICS (1: that config
// with analytics on, for the dashboard).
import "./lib/node-version.mjs";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, isPortOpen, portFromEnv } from "../tools/ports.mjs";
import { hasExited, spawnGroup, stopGroup } from "../tools/process-group.mjs";
import { ensureRedis, redactUrl } from "../tools/redis.mjs";

/** @typedef {import("../bridge/server.mjs").Bridge} Bridge */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const HOST = "127.0.0.1";
const READY_TIMEOUT_MS = 120_000;
// Offline, wrangler dev prints "Unable to fetch the `Request.cf` object" and a getaddrinfo stack
// trace for workers.cloudflare.com, twice per start. Harmless (request.cf is a placeholder
// locally), but it reads like a failure: said once, in one line, without the trace.
const CF_WARNING = /Unable to fetch the `Request\.cf` object/;
const CF_TRACE = /^(Error: getaddrinfo \w+ workers\.cloudflare\.com|\s+at )/;
let cfExplained = false;

const BANNER_PREFIX = "edge-limiter ready:";
/** How many times a probe that failed for any reason but the config is asked before NOT ready. */
const PROBE_TRIES = 3;

/** The readiness probe's body: an ad-hoc sliding-log quota on a key nothing else uses. */
const PROBE_BODY = JSON.stringify({ key: "npm-start-readiness", limit: 1, window: "1s" });

const log = (/** @type {string} */ message) => console.error(`[npm start] ${message}`);

/** Things to stop on the way out, in start order (stopped in reverse). */
const resources = /** @type {{ name: string, stop: () => Promise<void> }[]} */ ([]);
/** @type {Promise<never> | undefined} */
let shuttingDown;

/**
 * Stops everything started so far (newest first) and exits with `code`. Idempotent.
 * @param {number} code
 * @param {string} [reason] why, logged last: after wrangler's own lines, where it is seen
 * @returns {Promise<never>}
 */
function shutdown(code, reason) {
  shuttingDown ??= (async () => {
    for (const resource of resources.reverse()) {
      try {
        await resource.stop();
      } catch (error) {
        log(`stopping ${resource.name} failed: ${error instanceof Error ? error.message : error}`);
      }
    }
    if (reason) log(reason);
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
  await shutdown(1, error instanceof Error ? error.message : String(error));
}

async function main() {
  let port = portFromEnv("PORT", 8787);
  const bridgePort = portFromEnv("BRIDGE_PORT", 8079);
  const bridgeToken = process.env.BRIDGE_TOKEN || "dev-bridge-token";
  const limiterToken = process.env.LIMITER_TOKEN || "dev-limiter-token";
  const adminToken = process.env.LIMITER_ADMIN_TOKEN || "dev-admin-token";
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
  const externalStore = Boolean(upstashUrl && upstashToken);
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
    redisNote = `${redactUrl(redis.url)} (${
      redis.started
        ? "private redis-server"
        : process.env.REDIS_URL?.trim()
          ? "REDIS_URL"
          : "already running at the default, shared: set REDIS_URL for another"
    })`;
  }

  const limiterConfig = withAnalytics(process.env.LIMITER_CONFIG || undefined);
  const { workerUrl, verdict } = await startWrangler({
    port,
    token: limiterToken,
    vars: {
      UPSTASH_REDIS_REST_URL: restUrl,
      UPSTASH_REDIS_REST_TOKEN: restToken,
      LIMITER_TOKEN: limiterToken,
      LIMITER_ADMIN_TOKEN: adminToken,
      LIMITER_CONFIG: limiterConfig,
      ORIGIN_URL: process.env.ORIGIN_URL || undefined,
      // Each shard's and region's store (docs/shards.md, docs/regions.md): passed on as set.
      ...Object.fromEntries(
        Object.entries(process.env).filter(([name]) =>
          /^UPSTASH_REDIS_REST_(URL|TOKEN)_[A-Z0-9_]+$/.test(name),
        ),
      ),
    },
  });

  if (!verdict.ready) {
    // No "ready" and no curl to try: it would answer 503. Stop, like any other start-up failure.
    throw new Error(
      `edge-limiter NOT ready: ${verdict.problem.replace(/[\s.]+$/, "")}. ` +
        whatToFix(verdict, {
          configFromEnv: Boolean(process.env.LIMITER_CONFIG),
          storeFromEnv: externalStore,
        }),
    );
  }

  const sample =
    `curl -s -X POST ${workerUrl}/check -H 'Authorization: Bearer ${limiterToken}' ` +
    `-H 'Content-Type: application/json' -d '{"key":"demo","limit":100,"window":"1m"}'`;
  const analyticsOn = /"analytics"\s*:\s*\{[^}]*"enabled"\s*:\s*true/.test(
    limiterConfig ?? readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"),
  );
  const dashboard = analyticsOn
    ? `dashboard ${workerUrl}/check/dashboard (any user, password LIMITER_ADMIN_TOKEN)`
    : `dashboard ${workerUrl}/check/dashboard (analytics off: LIMITER_ANALYTICS=1 npm start)`;
  console.log(
    `${BANNER_PREFIX} worker ${workerUrl} | bridge ${bridgeNote} | redis ${redisNote} | ` +
      `LIMITER_TOKEN ${limiterToken} | LIMITER_ADMIN_TOKEN ${adminToken} | ${dashboard} | ` +
      `try: ${sample}`,
  );
}

/**
 * LIMITER_ANALYTICS=1: the config in use (LIMITER_CONFIG, else wrangler.toml's) with analytics
 * on, so the dashboard has counts to show without restating the rules. Otherwise the config as
 * given (undefined: wrangler.toml's).
 * @param {string | undefined} given
 * @returns {string | undefined}
 */
function withAnalytics(given) {
  if (!/^(1|true|yes|on)$/i.test(process.env.LIMITER_ANALYTICS ?? "")) return given;
  let text = given;
  if (text === undefined) {
    const toml = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
    text = /^LIMITER_CONFIG\s*=\s*'''([\s\S]*?)'''/m.exec(toml)?.[1];
    if (text === undefined) {
      throw new Error(
        "LIMITER_ANALYTICS=1 reads wrangler.toml's LIMITER_CONFIG as a '''JSON''' string; " +
          "it is not one there: set LIMITER_CONFIG with analytics on instead",
      );
    }
  }
  let config;
  try {
    config = JSON.parse(text);
  } catch {
    // Not JSON: the worker names what is wrong with it; analytics cannot be merged in.
    return given;
  }
  if (typeof config !== "object" || config === null || Array.isArray(config)) return given;
  config.analytics = { ...(config.analytics ?? {}), enabled: true };
  return JSON.stringify(config);
}

/**
 * Passes wrangler's output through `write` line by line, minus the Request.cf warning's trace.
 * @param {(text: string) => void} write
 */
function quietRequestCf(write) {
  let pending = "";
  let inTrace = false;
  return {
    /** @param {Buffer} chunk */
    write(chunk) {
      pending += chunk.toString("utf8");
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      let out = "";
      for (const line of lines) {
        const plain = stripAnsi(line);
        if (CF_WARNING.test(plain)) {
          inTrace = true;
          if (!cfExplained) {
            cfExplained = true;
            out +=
              "[npm start] wrangler cannot fetch Request.cf from workers.cloudflare.com (offline?): " +
              "harmless, request.cf is a placeholder locally\n";
          }
          continue;
        }
        if (inTrace && CF_TRACE.test(plain)) continue;
        inTrace = false;
        out += `${line}\n`;
      }
      if (out) write(out);
    },
    flush() {
      if (pending) write(pending);
      pending = "";
    },
  };
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
 * worker's URL and its verdict on itself once it answers HTTP.
 * @param {{ port: number, token: string, vars: Record<string, string | undefined> }} options
 * @returns {Promise<{ workerUrl: string, verdict: Verdict }>}
 */
async function startWrangler({ port, token, vars }) {
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
  // Stopped once its output is through too, so nothing it prints lands after our last word.
  const outputDone = Promise.all(
    [wrangler.stdout, wrangler.stderr].map(
      (stream) => new Promise((resolve) => (stream ? stream.once("close", resolve) : resolve(0))),
    ),
  );
  resources.push({
    name: "wrangler",
    stop: async () => {
      await stopGroup(wrangler, { graceMs: 5000 });
      await Promise.race([outputDone, new Promise((resolve) => setTimeout(resolve, 1000))]);
    },
  });

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
  const toStdout = quietRequestCf((text) => process.stdout.write(text));
  const toStderr = quietRequestCf((text) => process.stderr.write(text));
  wrangler.stdout?.on("data", (chunk) => {
    toStdout.write(chunk);
    watch(chunk);
  });
  wrangler.stderr?.on("data", (chunk) => {
    toStderr.write(chunk);
    watch(chunk);
  });
  wrangler.stdout?.once("close", toStdout.flush);
  wrangler.stderr?.once("close", toStderr.flush);

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
  // A refused config is final; any other failed probe (a store call that timed out on a loaded
  // machine, the first call that meets a store refusing TIME) is asked again a few times before
  // the worker is declared NOT ready: one slow answer must not stop `npm start`.
  let storeTries = 0;
  for (;;) {
    const verdict = announced ? await probe(workerUrl, token) : undefined;
    if (
      verdict &&
      !verdict.ready &&
      !verdict.field &&
      !verdict.final &&
      ++storeTries < PROBE_TRIES
    ) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      continue;
    }
    if (verdict) return { workerUrl, verdict };
    if (shuttingDown || hasExited(wrangler)) await new Promise(() => {}); // shutdown() exits
    if (Date.now() > deadline) {
      throw new Error(
        `wrangler dev did not answer on ${workerUrl} within ${READY_TIMEOUT_MS / 1000} s`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * @typedef {{ ready: true } | { ready: false, problem: string, field?: string, store?: true, final?: true }} Verdict
 */

/**
 * The worker's verdict on itself, counting nothing, or undefined while nothing answers HTTP yet.
 * One authorized POST /check/peek (a read-only look at a quota no one uses) is a 200 once the
 * config is valid and the store answers; a 503 naming the field when the config is refused, or
 * saying the store did not answer. wrangler dev logs every request with its status, so a healthy
 * start logs a 200 here (probing GET /check, a 405, and an empty /check body, a 400, read as
 * errors). Never `/`: the proxy would forward it to the origin and count it against a rule.
 * @param {string} workerUrl
 * @param {string} token
 * @returns {Promise<Verdict | undefined>}
 */
async function probe(workerUrl, token) {
  /** @type {Response} */
  let res;
  try {
    res = await fetch(`${workerUrl}/check/peek`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: PROBE_BODY,
      // The worker's own store timeout is at most 30 s (timeoutMs); past that, try again.
      signal: AbortSignal.timeout(35_000),
    });
  } catch {
    return undefined;
  }
  if (res.ok) {
    await res.body?.cancel();
    return { ready: true };
  }
  const body = /** @type {{ title?: string, detail?: string, field?: string, cause?: string }} */ (
    await res.json().catch(() => ({}))
  );
  if (res.status === 503 && body.title === "Store unavailable" && body.cause === "unauthorized") {
    // Final, not asked again: a wrong token stays wrong.
    return {
      ready: false,
      store: true,
      final: true,
      problem:
        "the worker's store refused its token (unauthorized): UPSTASH_REDIS_REST_TOKEN is wrong",
    };
  }
  if (res.status === 503 && body.title === "Store unavailable") {
    return {
      ready: false,
      store: true,
      problem: `the worker's store did not answer${body.detail ? ` (${body.detail})` : ""}`,
    };
  }
  if (res.status === 503 && body.field) {
    // A field of LIMITER_CONFIG (rules[0].window) is named as one, so the reader knows where.
    const inConfig = !/^(LIMITER_CONFIG|UPSTASH_REDIS_REST_\w+)$/.test(body.field);
    return {
      ready: false,
      field: body.field,
      problem:
        "the worker refuses its configuration and answers 503 to every request: " +
        `${inConfig ? "LIMITER_CONFIG " : ""}${body.detail}`,
    };
  }
  return {
    ready: false,
    problem: `POST /check/peek answered ${res.status}${body.detail ? `: ${body.detail}` : ""}`,
  };
}

/**
 * What a newcomer should change, for a verdict that is not ready.
 * @param {Extract<Verdict, { ready: false }>} verdict
 * @param {{ configFromEnv: boolean, storeFromEnv: boolean }} where
 */
function whatToFix(verdict, { configFromEnv, storeFromEnv }) {
  const store = storeFromEnv
    ? "UPSTASH_REDIS_REST_URL and UPSTASH_REDIS_REST_TOKEN in your environment"
    : "the local bridge and Redis above";
  if (verdict.store) return `Check ${store} (the worker's log line above says why).`;
  const suffixed = /^UPSTASH_REDIS_REST_(?:URL|TOKEN)_(\w+)$/.exec(verdict.field ?? "");
  if (suffixed) {
    // A shard's or a region's own store: npm start passes these on from the environment.
    return (
      `Set UPSTASH_REDIS_REST_URL_${suffixed[1]} and UPSTASH_REDIS_REST_TOKEN_${suffixed[1]} in ` +
      "your environment (that store's REST endpoint, e.g. a bridge of its own: npm run bridge), " +
      "then run npm start again."
    );
  }
  if (verdict.field?.startsWith("UPSTASH_REDIS_REST_")) {
    return `Fix ${store}, then run npm start again.`;
  }
  if (verdict.field) {
    // Every other field is LIMITER_CONFIG's.
    return configFromEnv
      ? "Fix LIMITER_CONFIG in your environment (or unset it to use wrangler.toml's), then run " +
          "npm start again."
      : "Fix LIMITER_CONFIG under [vars] in wrangler.toml, then run npm start again.";
  }
  return "See the worker's log above.";
}

/** @param {string} text */
function stripAnsi(text) {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences
  return text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, "");
}
