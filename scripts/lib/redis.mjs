// @ts-check
// A Redis for npm start / npm test: the one at REDIS_URL (default redis://127.0.0.1:6379), or a
// private redis-server from PATH on a free port when nothing answers there. Node only.
import { accessSync, constants, mkdtempSync, rmSync } from "node:fs";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "./ports.mjs";
import { spawnGroup, stopGroup } from "./process-group.mjs";

const DEFAULT_REDIS_URL = "redis://127.0.0.1:6379";

/** @typedef {(message: string) => void} Log */
/** @typedef {{ url: string, started: boolean, stop: () => Promise<void> }} RedisHandle */

/**
 * Returns a Redis that answers PING: the one at `url` if it is up; otherwise, when no URL was
 * given explicitly (no `url` option, no REDIS_URL), a private `redis-server` from PATH on a free
 * port with no persistence, stopped (and its temp dir removed) by `stop()`.
 * Throws an Error that says what is missing and how to fix it when neither works.
 * @param {{ url?: string, log?: Log }} [options]
 * @returns {Promise<RedisHandle>}
 */
export async function ensureRedis({ url, log = () => {} } = {}) {
  const fromEnv = process.env.REDIS_URL?.trim() || undefined;
  const explicit = url ?? fromEnv;
  const target = explicit ?? DEFAULT_REDIS_URL;

  const ping = await pingRedis(target);
  if (ping.ok) {
    // Said plainly when it is the default: a Redis someone else runs, whose data is shared.
    log(
      explicit === undefined
        ? `redis: REDIS_URL unset; using the Redis already running at ${redactUrl(target)} ` +
            "(not started by us, shared with whatever else uses it; set REDIS_URL for another)"
        : `redis: using ${redactUrl(target)} (${url !== undefined ? "url" : "REDIS_URL"})`,
    );
    return { url: target, started: false, stop: async () => {} };
  }
  if (explicit !== undefined) {
    throw new Error(
      `Redis at ${redactUrl(target)} (${url !== undefined ? "url" : "REDIS_URL"}) does not answer PING: ${ping.error}. ` +
        "Start that Redis, or fix or unset REDIS_URL (unset, a private redis-server from PATH " +
        "is started when nothing answers at the default redis://127.0.0.1:6379).",
    );
  }

  const binary = findOnPath("redis-server");
  if (!binary) {
    throw new Error(
      `No Redis answers at ${DEFAULT_REDIS_URL} (${ping.error}) and redis-server is not on PATH. ` +
        "Install Redis 7 (e.g. `sudo apt install redis-server`, `brew install redis`) so a " +
        "private one can be started, or set REDIS_URL to a Redis that is running.",
    );
  }
  log(`redis: nothing answers at ${DEFAULT_REDIS_URL}; starting a private ${binary}`);
  return startPrivateRedis(binary, log);
}

/**
 * The `redis-server` arguments of a private Redis: 127.0.0.1:`port`, no persistence, `dir` as its
 * working directory, in the foreground, logging to stdout.
 * @param {number} port
 * @param {string} dir
 * @returns {string[]}
 */
export function privateRedisArgs(port, dir) {
  return [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--save",
    "",
    "--appendonly",
    "no",
    "--dir",
    dir,
    "--daemonize",
    "no",
    "--logfile",
    "",
  ];
}

/**
 * Starts `redis-server` on a free 127.0.0.1 port with no persistence; retries on a port race.
 * (npm test / npm start when nothing answers; the benchmark and scripts/measure-commands.mjs,
 * whose INFO/MEMORY figures must see only their own traffic.)
 * @param {string} [binary]
 * @param {Log} [log]
 * @returns {Promise<RedisHandle>}
 */
export async function startPrivateRedis(binary = "redis-server", log = () => {}) {
  let lastError = "";
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const dir = mkdtempSync(path.join(tmpdir(), "edge-limiter-redis-"));
    const child = spawnGroup(binary, privateRedisArgs(port, dir), {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout?.on("data", (d) => {
      output = (output + d).slice(-4000);
    });
    child.stderr?.on("data", (d) => {
      output = (output + d).slice(-4000);
    });
    const url = `redis://127.0.0.1:${port}`;
    const cleanup = async () => {
      await stopGroup(child, { graceMs: 3000 });
      rmSync(dir, { recursive: true, force: true });
    };
    const spawnError = new Promise((resolve) => child.once("error", resolve));
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      const failed = await Promise.race([spawnError, delay(50)]);
      if (failed) {
        output += String(failed);
        break;
      }
      if ((await pingRedis(url, 250)).ok) {
        log(`redis: private redis-server on ${url} (pid ${child.pid})`);
        return { url, started: true, stop: cleanup };
      }
    }
    await cleanup();
    lastError = output.trim() || "it did not answer PING within 10 s";
  }
  throw new Error(`Could not start a private redis-server: ${lastError}`);
}

/**
 * Sends PING (after AUTH if the URL has credentials) over a raw TCP connection.
 * @param {string} url redis://[[user]:password@]host[:port][/db]
 * @param {number} [timeoutMs]
 * @returns {Promise<{ ok: true } | { ok: false, error: string }>}
 */
function pingRedis(url, timeoutMs = 1000) {
  /** @type {URL} */
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return Promise.resolve({ ok: false, error: `not a URL: ${JSON.stringify(url)}` });
  }
  if (parsed.protocol !== "redis:") {
    return Promise.resolve({
      ok: false,
      error: `only redis:// URLs are supported, got ${parsed.protocol}//`,
    });
  }
  const host = parsed.hostname.replace(/^\[|\]$/g, "") || "127.0.0.1";
  const port = Number(parsed.port || 6379);
  /** @type {string[][]} */
  const commands = [];
  if (parsed.password) {
    const user = decodeURIComponent(parsed.username);
    const password = decodeURIComponent(parsed.password);
    commands.push(user ? ["AUTH", user, password] : ["AUTH", password]);
  }
  commands.push(["PING"]);
  const payload = commands.map(encodeCommand).join("");

  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let buffer = "";
    let settled = false;
    const finish = (/** @type {{ ok: true } | { ok: false, error: string }} */ result) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () =>
      finish({ ok: false, error: `no answer within ${timeoutMs} ms` }),
    );
    socket.once("error", (err) => finish({ ok: false, error: err.message }));
    socket.once("connect", () => socket.write(payload));
    socket.on("data", (chunk) => {
      buffer += chunk.toString("utf8");
      const lines = buffer.split("\r\n");
      for (const line of lines.slice(0, -1)) {
        if (line.startsWith("-")) return finish({ ok: false, error: line.slice(1) });
        if (line === "+PONG") return finish({ ok: true });
      }
    });
    socket.once("end", () => finish({ ok: false, error: "connection closed" }));
  });
}

/** @param {string[]} parts */
function encodeCommand(parts) {
  return `*${parts.length}\r\n${parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join("")}`;
}

/**
 * The URL with any password replaced, for logs.
 * @param {string} url
 */
export function redactUrl(url) {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return url;
  }
}

/**
 * The absolute path of an executable on PATH, or undefined.
 * @param {string} name
 */
function findOnPath(name) {
  for (const dir of (process.env.PATH ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** @param {number} ms */
function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms, undefined));
}
