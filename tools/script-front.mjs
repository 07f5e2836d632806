// @ts-check
// A network boundary in front of a store (a bridge, or a delay proxy before one) that sees every
// script call on its way, for the region tests (test/e2e/regions.test.ts):
// - `stepMs`: the scripts run on a clock stepped that far from the server's (negative: back, as
//   an NTP step or a failover to a server whose clock is behind does). Every `redis.call('TIME')`
//   in a script's text is replaced by the server's TIME plus the step, and the call goes on as
//   EVAL of that text: real Redis runs the real script, only the time it reads has moved. (An
//   EVALSHA is turned into that EVAL when the front has seen the script; otherwise it is sent
//   with a SHA Redis cannot know, so the client's NOSCRIPT fallback sends the text.)
// - `hold(test)`: the next request carrying a command that `test` accepts is held, unanswered
//   and unforwarded, until released: a call that reaches the store late, on purpose (`done`
//   settles once its answer is back).
import { createHash } from "node:crypto";
import http from "node:http";
import { forward } from "./store-front.mjs";

/** A SHA that names no script: Redis answers NOSCRIPT. */
const UNKNOWN_SHA = "0".repeat(40);

/** @param {string} text */
const sha1 = (text) => createHash("sha1").update(text, "utf8").digest("hex");

/**
 * The script as it runs behind the front: TIME read through a function that adds `stepMs`.
 * @param {string} script @param {number} stepMs
 */
function stepped(script, stepMs) {
  const clock = `local function front_time()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2]) + (${Math.round(stepMs * 1000)})
  local s = math.floor(us / 1000000)
  return {string.format('%d', s), string.format('%d', us - s * 1000000)}
end
`;
  const body = script.replace(/redis\.call\((['"])TIME\1\)/g, "front_time()");
  // After the shebang line (`#!lua flags=…` must stay first).
  if (!script.startsWith("#!")) return clock + body;
  const newline = body.indexOf("\n");
  return `${body.slice(0, newline + 1)}${clock}${body.slice(newline + 1)}`;
}

/**
 * @param {string} target the store's URL (a bridge, or a proxy in front of one)
 */
export async function startScriptFront(target) {
  /** @type {Map<string, string>} SHA1 of a script's text → the text */
  const scripts = new Map();
  /**
   * @typedef {{ test: (command: string[]) => boolean, arrived: () => void, released: Promise<void>, answered: () => void }} Hold
   * @type {Hold[]}
   */
  const holds = [];
  const front = { stepMs: 0 };

  /** @param {unknown} command @returns {unknown} */
  const rewrite = (command) => {
    if (!Array.isArray(command) || typeof command[0] !== "string") return command;
    const name = command[0].toUpperCase();
    if (name === "EVAL") {
      const script = String(command[1]);
      scripts.set(sha1(script), script);
      return ["EVAL", stepped(script, front.stepMs), ...command.slice(2)];
    }
    if (name === "EVALSHA") {
      const script = scripts.get(String(command[1]));
      if (script === undefined) return ["EVALSHA", UNKNOWN_SHA, ...command.slice(2)];
      return ["EVAL", stepped(script, front.stepMs), ...command.slice(2)];
    }
    return command;
  };

  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    let body = Buffer.concat(chunks);
    /** @type {Hold | undefined} */
    let hold;
    try {
      const parsed = JSON.parse(body.toString("utf8"));
      const commands = Array.isArray(parsed[0]) ? parsed : [parsed];
      hold = holds.find((h) =>
        commands.some(
          (/** @type {unknown} */ c) => Array.isArray(c) && h.test(c.map((part) => String(part))),
        ),
      );
      if (hold) {
        holds.splice(holds.indexOf(hold), 1);
        hold.arrived();
        await hold.released;
      }
      const rewritten = Array.isArray(parsed[0]) ? parsed.map(rewrite) : rewrite(parsed);
      body = Buffer.from(JSON.stringify(rewritten));
    } catch {
      // Not JSON: forwarded as it came (the store answers it).
    }
    await forward(target, req, res, body);
    hold?.answered();
  });
  const port = await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      resolve(typeof address === "object" && address ? address.port : 0);
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    /** Set `front.stepMs` to step the scripts' clock (ms; negative: back). */
    front,
    /**
     * Holds the next request with a command `test` accepts (the command's parts as strings).
     * `arrived` settles when it is held; `release()` sends it on; `done` settles when its
     * answer has been sent back.
     * @param {(command: string[]) => boolean} test
     */
    hold(test) {
      /** @type {() => void} */
      let arrived = () => {};
      /** @type {() => void} */
      let release = () => {};
      /** @type {() => void} */
      let answered = () => {};
      const arrival = new Promise((resolve) => {
        arrived = () => resolve(undefined);
      });
      const released = new Promise((resolve) => {
        release = () => resolve(undefined);
      });
      const done = new Promise((resolve) => {
        answered = () => resolve(undefined);
      });
      holds.push({
        test,
        arrived,
        answered,
        released: /** @type {Promise<void>} */ (released),
      });
      return {
        arrived: /** @type {Promise<void>} */ (arrival),
        release,
        done: /** @type {Promise<void>} */ (done),
      };
    },
    /** @returns {Promise<void>} */
    close() {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}
