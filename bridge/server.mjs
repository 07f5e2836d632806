// @ts-check
// An Upstash-compatible REST server in front of a plain Redis, for local development and tests.
// It speaks the protocol as @upstash/redis 1.39 uses it (see design.md, "The Upstash REST
// protocol"): POST `/` for one command, `/pipeline` for many (the client's default, since it
// auto-pipelines), `/multi-exec` for a transaction.
//
// With `maxCommandsPerSecond` (BRIDGE_MAX_COMMANDS_PER_SECOND) it throttles as Upstash does: a
// request waits until its billed commands fit under the cap (command-throttle.mjs: a token bucket
// of one second's worth, FIFO, nothing refused), a script call billed with the commands it runs
// inside (script-billing.mjs). `GET /_bridge/stats` (same token) and `bridge.stats()` say what it
// billed and admitted, by second.

import { createHash, timingSafeEqual } from "node:crypto";
import http from "node:http";
import { CommandThrottle, realClock, ThrottleAbortedError } from "./command-throttle.mjs";
import {
  DEFAULT_MAX_TRANSACTIONS,
  DedicatedPool,
  PoolExhaustedError,
  SharedRedis,
} from "./redis-link.mjs";
import { refusal } from "./refused-commands.mjs";
import { encodeReply } from "./reply-encoding.mjs";
import { BadRequestError, parseCommand, parseCommandList } from "./request-body.mjs";
import { parseRedisUrl, RedisReplyError, RedisUnavailableError } from "./resp-connection.mjs";
import { ScriptBilling } from "./script-billing.mjs";
import { ScriptShebangRewriter } from "./script-shebang.mjs";

/** @typedef {import("./resp-connection.mjs").Reply} Reply */
/** @typedef {import("./reply-encoding.mjs").JsonReply} JsonReply */
/** @typedef {{ result: JsonReply } | { error: string }} CommandOutcome */
/** @typedef {import("./script-shebang.mjs").Prepared} Prepared */
/** @typedef {import("./command-throttle.mjs").ThrottleClock} ThrottleClock */

/** The bridge's own figures (BridgeStats), GET with the bearer token; not part of Upstash's API. */
export const STATS_PATH = "/_bridge/stats";
/** Bodies beyond this are refused with 413; the protocol asks for at least 10 MB. */
const MAX_BODY_BYTES = 64 * 1024 * 1024;
/** Longer than any client's idle keep-alive (undici: 4 s), so the client always closes first and
 * never reuses a socket the server is closing at that moment. */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;
const GRACEFUL_CLOSE_MS = 2_000;

/** An answer for the whole request: `{"error": message}` with a non-2xx status. */
class HttpError extends Error {
  /** @param {number} status @param {string} message */
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/**
 * @typedef {object} BridgeOptions
 * @property {string} token the bearer token clients must send
 * @property {string} [host] interface to listen on (default 127.0.0.1)
 * @property {number} [port] default 8079; 0 picks a free port
 * @property {string} [redisUrl] default redis://127.0.0.1:6379
 * @property {(line: string) => void} [log] connection events and internal errors
 * @property {number} [maxTransactions] `/multi-exec` requests in flight at once, each on a Redis
 *   connection of its own (default 32); past it, 503
 * @property {number} [maxCommandsPerSecond] billed commands a second, as Upstash caps a database
 *   (pay-as-you-go: 10 000); past it requests wait. Default: no cap
 * @property {ThrottleClock} [clock] what the cap reads time from (tests: a fake clock)
 */

/**
 * What the bridge billed: every command it sent Redis, script calls with the commands they ran.
 * @typedef {object} BridgeStats
 * @property {number | null} maxCommandsPerSecond the cap, null when none
 * @property {number | null} burst commands admitted at once after an idle second (the bucket)
 * @property {number} billedCommands everything billed so far
 * @property {number} requests HTTP requests that reached Redis
 * @property {number} commands top-level commands among them (a script call is one)
 * @property {number} scriptCalls EVAL / EVALSHA answered
 * @property {number} countedScriptCalls of those, how many had their inner commands counted
 *   exactly (only while a cap is set; the others are billed at their estimate)
 * @property {number} scriptInnerCommands the commands scripts ran inside, as billed
 * @property {number} waiting requests waiting for the cap now
 * @property {number} waitingCommands their commands
 * @property {{ second: number, commands: number }[]} intervals commands billed in each second
 *   since the bridge started (second 0 = its first; with a cap only)
 */

/**
 * @typedef {object} Bridge
 * @property {string} url e.g. http://127.0.0.1:8079
 * @property {number} port
 * @property {() => Promise<void>} close stops listening, then closes the Redis connections
 * @property {() => BridgeStats} stats what it billed and admitted so far
 */

/**
 * Connects to Redis (rejecting at once if it cannot be reached), then listens.
 * @param {BridgeOptions} options
 * @returns {Promise<Bridge>}
 */
export async function startBridge({
  host = "127.0.0.1",
  port = 8079,
  token,
  redisUrl = "redis://127.0.0.1:6379",
  log = () => {},
  maxTransactions = DEFAULT_MAX_TRANSACTIONS,
  maxCommandsPerSecond,
  clock = realClock,
}) {
  if (typeof token !== "string" || token === "") {
    throw new Error("startBridge needs a non-empty token: the bridge never runs unauthenticated");
  }
  if (
    maxCommandsPerSecond !== undefined &&
    !(Number.isSafeInteger(maxCommandsPerSecond) && maxCommandsPerSecond >= 1)
  ) {
    throw new Error(
      `maxCommandsPerSecond must be a whole number ≥ 1 (or left out for no cap), got ${maxCommandsPerSecond}`,
    );
  }
  parseRedisUrl(redisUrl); // a malformed URL is a configuration error, not "Redis is down"

  const redis = new SharedRedis(redisUrl, log);
  await redis.start();
  const pool = new DedicatedPool(redisUrl, maxTransactions);
  const throttle =
    maxCommandsPerSecond === undefined
      ? undefined
      : new CommandThrottle({ perSecond: maxCommandsPerSecond, clock });
  // Scripts' inner commands are counted (scripts sent in a counting wrapper) only under a cap:
  // without one the bridge sends Redis exactly what the client sent, flags aside.
  const scripts = new ScriptShebangRewriter({ countCalls: throttle !== undefined });
  const billing = new ScriptBilling();
  const totals = { billed: 0, requests: 0, commands: 0 };
  const expectedAuth = digest(`Bearer ${token}`);

  const server = http.createServer((req, res) => {
    // A request still waiting for the cap when its client goes away leaves the queue.
    const gone = new AbortController();
    res.once("close", () => {
      if (!res.writableEnded) gone.abort();
    });
    handle(req, gone.signal).then(
      ({ status, body }) => reply(res, status, body),
      (error) => {
        if (error instanceof HttpError) {
          reply(res, error.status, { error: error.message });
        } else if (error instanceof BadRequestError) {
          reply(res, 400, { error: error.message });
        } else if (error instanceof RedisUnavailableError) {
          reply(res, 503, { error: `ERR ${error.message}` });
        } else if (error instanceof ThrottleAbortedError) {
          reply(res, 503, { error: `ERR ${error.message} while waiting for the command cap` });
        } else {
          log(`internal error: ${error instanceof Error ? (error.stack ?? error.message) : error}`);
          reply(res, 500, { error: `ERR bridge internal error: ${error}` });
        }
      },
    );
  });
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;

  /**
   * @param {http.IncomingMessage} req
   * @param {AbortSignal} gone aborts when the client went away before its answer
   * @returns {Promise<{ status: number, body: unknown }>}
   */
  async function handle(req, gone) {
    const path = (req.url ?? "/").split("?")[0]?.replace(/(.)\/+$/, "$1");
    if (path === STATS_PATH) {
      if (req.method !== "GET") throw new HttpError(405, `ERR ${STATS_PATH} takes GET`);
      authorize(req);
      return { status: 200, body: stats() };
    }
    if (path !== "/" && path !== "/pipeline" && path !== "/multi-exec") {
      throw new HttpError(
        404,
        `ERR unknown endpoint ${path}: use POST /, /pipeline or /multi-exec`,
      );
    }
    if (req.method !== "POST") {
      throw new HttpError(405, `ERR ${req.method} is not supported: the REST API takes POST`);
    }
    authorize(req);
    const text = await readBody(req);
    const base64 = req.headers["upstash-encoding"]?.toString().toLowerCase() === "base64";
    if (path === "/") return runOne(parseCommand(text), base64, gone);
    if (path === "/pipeline")
      return { status: 200, body: await runPipeline(parseCommandList(text), base64, gone) };
    return { status: 200, body: await runTransaction(parseCommandList(text), base64, gone) };
  }

  /** @param {http.IncomingMessage} req */
  function authorize(req) {
    const auth = req.headers.authorization;
    if (auth === undefined || !timingSafeEqual(digest(auth), expectedAuth)) {
      throw new HttpError(401, "ERR unauthorized: send Authorization: Bearer <token>");
    }
  }

  /**
   * Bills the commands about to go to Redis: waits for the cap when there is one.
   * @param {readonly Prepared[]} prepared
   * @param {AbortSignal} gone
   */
  async function bill(prepared, gone) {
    let cost = 0;
    for (const p of prepared) cost += billing.estimate(p);
    if (throttle) await throttle.admit(cost, gone);
    totals.billed += cost;
    totals.requests++;
    totals.commands += prepared.length;
  }

  /**
   * Redis's answer to a prepared command as the client expects it; a script's true count of
   * commands corrects its estimate.
   * @param {Prepared} prepared
   * @param {Reply} answer
   * @returns {Reply}
   */
  function settle(prepared, answer) {
    const { reply, delta } = billing.settle(prepared, answer);
    if (delta !== 0) {
      totals.billed += delta;
      throttle?.settle(delta);
    }
    return reply instanceof RedisReplyError ? reply : prepared.fixReply(reply);
  }

  /** @returns {BridgeStats} */
  function stats() {
    const capped = throttle?.stats();
    return {
      maxCommandsPerSecond: capped?.perSecond ?? null,
      burst: capped?.burst ?? null,
      billedCommands: totals.billed,
      requests: totals.requests,
      commands: totals.commands,
      ...billing.stats(),
      waiting: capped?.waiting ?? 0,
      waitingCommands: capped?.waitingCommands ?? 0,
      intervals: capped?.intervals ?? [],
    };
  }

  /** @param {string[]} command @param {boolean} base64 @param {AbortSignal} gone */
  async function runOne(command, base64, gone) {
    const refused = refusal(command);
    if (refused) throw new HttpError(400, refused);
    const prepared = scripts.prepare(command);
    await bill([prepared], gone);
    const raw = await /** @type {Promise<Reply>} */ (redis.sendBatch([prepared.command])[0]);
    const answer = settle(prepared, raw);
    // A Redis error is a 400 with Redis's text verbatim: the client looks for NOSCRIPT in it.
    if (answer instanceof RedisReplyError) throw new HttpError(400, answer.message);
    return { status: 200, body: { result: encodeReply(answer, base64) } };
  }

  /**
   * Refused commands get their error in place; the others go to Redis in one write.
   * @param {string[][]} commands
   * @param {boolean} base64
   * @param {AbortSignal} gone
   * @returns {Promise<CommandOutcome[]>}
   */
  async function runPipeline(commands, base64, gone) {
    const slots = commands.map((command) => {
      const refused = refusal(command);
      return refused ? { refused } : scripts.prepare(command);
    });
    const toSend = slots.flatMap((slot) => ("command" in slot ? [slot] : []));
    if (toSend.length > 0) await bill(toSend, gone);
    const answers = await Promise.all(redis.sendBatch(toSend.map((p) => p.command)));
    let next = 0;
    return slots.map((slot) => {
      if ("refused" in slot) return { error: slot.refused };
      return outcome(settle(slot, /** @type {Reply} */ (answers[next++])), base64);
    });
  }

  /**
   * MULTI … EXEC on a connection of its own. A refused command refuses the whole transaction
   * (400), as Redis does with EXECABORT for a command it cannot queue.
   * @param {string[][]} commands
   * @param {boolean} base64
   * @param {AbortSignal} gone
   * @returns {Promise<CommandOutcome[]>}
   */
  async function runTransaction(commands, base64, gone) {
    for (const [i, command] of commands.entries()) {
      const refused = refusal(command);
      if (refused) throw new HttpError(400, `${refused} (command ${i + 1} of the transaction)`);
    }
    const prepared = commands.map((command) => scripts.prepare(command));
    // Billed before a connection is taken, so transactions waiting for the cap hold none.
    await bill(prepared, gone);
    let connection;
    try {
      connection = await pool.acquire();
    } catch (error) {
      if (error instanceof PoolExhaustedError) throw new HttpError(503, `ERR ${error.message}`);
      throw error;
    }
    let reusable = false;
    try {
      const answers = await Promise.all(
        connection.sendBatch([["MULTI"], ...prepared.map((p) => p.command), ["EXEC"]]),
      );
      reusable = true;
      const exec = answers[answers.length - 1];
      if (exec instanceof RedisReplyError) {
        // EXECABORT: a command could not be queued (unknown, wrong arity); nothing ran.
        const queued = answers.slice(1, -1);
        const failed = queued.findIndex((a) => a instanceof RedisReplyError);
        const why =
          failed < 0
            ? ""
            : ` (command ${failed + 1}: ${/** @type {Error} */ (queued[failed]).message})`;
        throw new HttpError(400, `${exec.message}${why}`);
      }
      if (!Array.isArray(exec) || exec.length !== prepared.length) {
        throw new Error(`EXEC answered ${JSON.stringify(encodeReply(exec ?? null, false))}`);
      }
      return exec.map((answer, i) =>
        outcome(settle(/** @type {Prepared} */ (prepared[i]), answer), base64),
      );
    } finally {
      pool.release(connection, reusable);
    }
  }

  await new Promise((resolve, reject) => {
    server.once("error", (error) => {
      throttle?.close();
      redis.close();
      const code = /** @type {NodeJS.ErrnoException} */ (error).code;
      reject(
        code === "EADDRINUSE"
          ? new Error(`port ${port} on ${host} is already in use`, { cause: error })
          : error,
      );
    });
    server.listen(port, host, () => resolve(undefined));
  });
  server.on("error", (error) => log(`server error: ${error.message}`));

  const address = /** @type {import("node:net").AddressInfo} */ (server.address());
  const shownHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  const url = `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${address.port}`;

  /** @type {Promise<void> | undefined} */
  let closing;
  return {
    url,
    port: address.port,
    stats,
    close() {
      closing ??= new Promise((resolve) => {
        // Let requests in flight finish, but do not wait for idle keep-alive sockets.
        const force = setTimeout(() => server.closeAllConnections(), GRACEFUL_CLOSE_MS);
        force.unref();
        server.close(() => {
          clearTimeout(force);
          redis.close();
          pool.close();
          resolve();
        });
        server.closeIdleConnections();
        // Requests waiting for the cap are answered (503) rather than held past the close.
        throttle?.close();
      });
      return closing;
    },
  };
}

/** @param {Reply} answer @param {boolean} base64 @returns {CommandOutcome} */
function outcome(answer, base64) {
  return answer instanceof RedisReplyError
    ? { error: answer.message }
    : { result: encodeReply(answer, base64) };
}

/** Fixed-length digests, so the token comparison is constant-time whatever was sent. */
/** @param {string} text */
function digest(text) {
  return createHash("sha256").update(text, "utf8").digest();
}

/**
 * @param {http.IncomingMessage} req
 * @returns {Promise<string>}
 */
async function readBody(req) {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > MAX_BODY_BYTES) throw tooLarge();
  /** @type {Buffer[]} */
  const chunks = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) throw tooLarge();
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof HttpError) throw error;
    // The client went away mid-body; nobody will read the answer, but it is not our bug.
    throw new HttpError(400, `ERR the request body was cut short (${error})`);
  }
  return Buffer.concat(chunks, size).toString("utf8");
}

function tooLarge() {
  return new HttpError(413, `ERR the body is larger than ${MAX_BODY_BYTES} bytes`);
}

/**
 * @param {http.ServerResponse} res
 * @param {number} status
 * @param {unknown} body
 */
function reply(res, status, body) {
  const json = Buffer.from(JSON.stringify(body), "utf8");
  res.writeHead(status, {
    "Content-Type": "application/json",
    "Content-Length": json.length,
    // A refused oversized body is left unread; the connection cannot be reused after it.
    ...(status === 413 ? { Connection: "close" } : {}),
  });
  res.end(json);
}
