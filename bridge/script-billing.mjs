// @ts-check
// What Upstash bills for a request: every command in it, and for EVAL / EVALSHA the call itself
// plus every redis.call / redis.pcall the script makes (design.md, "What a decision costs on
// Upstash"). The throttle (command-throttle.mjs) charges a request's bill when it admits it.
//
// How a script's inner commands are known. Redis's INFO commandstats counts them, but globally:
// with other requests in flight its deltas cannot be pinned on one call. So while a cap is set,
// the bridge counts them itself: it sends Redis the script wrapped (countingScript) so that
// redis.call and redis.pcall, shadowed by a local `redis`, count the calls they pass through,
// and the script answers {count, its own answer}; the bridge strips that before the client sees
// it (unwrapCounted). Exact for any script that calls through `redis.call` / `redis.pcall` and
// returns (ours and @upstash/ratelimit's all do); line numbers in Redis's error texts stay the
// script's own. What it cannot see: a script that raises an error (its count is lost with its
// answer) or one that reached Redis unwrapped (an EVALSHA of a SHA this bridge did not load).
// Those keep their estimate.
//
// The charge therefore comes in two steps: on arrival, 1 + an estimate (the count the same
// script made last time, or DEFAULT_SCRIPT_ESTIMATE for one not seen yet: TIME, a read, a
// write); after the reply, the difference to the true count (ScriptBilling.settle), which may
// leave the bucket briefly in debt or give tokens back. For a script whose count does not vary
// (ours on one path, the anchor's) the estimate is exact from its second call on.
//
// Not counted: MULTI / EXEC around a /multi-exec (its commands are), commands the bridge refuses
// (they never reach Redis), and FCALL's function bodies (charged as one command each).

import { RedisReplyError } from "./resp-connection.mjs";

/** @typedef {import("./resp-connection.mjs").Reply} Reply */

/** Inner commands assumed for a script not seen yet: the floor of an exact log (design.md). */
const DEFAULT_SCRIPT_ESTIMATE = 3;
/** Bound on the scripts whose last count is remembered; the oldest is forgotten first. */
const MAX_REMEMBERED = 10_000;

// Kept on one line, so the script's lines keep their numbers; names no script of ours uses.
const PRELUDE =
  "local __bridge_calls = 0 local __bridge_redis = redis " +
  "local redis = setmetatable({ " +
  "call = function(...) __bridge_calls = __bridge_calls + 1 return __bridge_redis.call(...) end, " +
  "pcall = function(...) __bridge_calls = __bridge_calls + 1 return __bridge_redis.pcall(...) end " +
  "}, { __index = __bridge_redis }) " +
  "local function __bridge_body(...) ";
const EPILOGUE =
  "\nend local __bridge_answer = __bridge_body(...) return { __bridge_calls, __bridge_answer }";

/**
 * The script as the bridge sends it to Redis while it counts: the same text (shebang line first,
 * every line on its number) inside a function whose calls are counted, answering
 * `{calls, answer}`. Inside an array Redis converts the answer as it would at the top (tables,
 * status and error replies, false → nil), so unwrapCounted gives back what the script would.
 * @param {string} script
 */
export function countingScript(script) {
  if (!script.startsWith("#!")) return `${PRELUDE}${script}${EPILOGUE}`;
  const newline = script.indexOf("\n");
  if (newline < 0) return `${script}\n${PRELUDE}${EPILOGUE}`;
  return `${script.slice(0, newline + 1)}${PRELUDE}${script.slice(newline + 1)}${EPILOGUE}`;
}

/**
 * A counting script's reply as the client expects it, and how many commands the script made
 * (undefined when not known: an error reply other than NOSCRIPT, which means nothing ran).
 * @param {Reply} reply
 * @returns {{ reply: Reply, calls: number | undefined }}
 */
function unwrapCounted(reply) {
  if (reply instanceof RedisReplyError) {
    return { reply, calls: reply.message.startsWith("NOSCRIPT") ? 0 : undefined };
  }
  if (Array.isArray(reply) && typeof reply[0] === "number") {
    // A nil answer leaves the table {calls}: Lua arrays end at the first nil.
    return { reply: reply.length > 1 ? (reply[1] ?? null) : null, calls: reply[0] };
  }
  return { reply, calls: undefined };
}

/**
 * Which script a prepared command calls, when it calls one.
 * @typedef {object} ScriptCall
 * @property {string} sha the client's SHA of the script (the text it holds)
 * @property {boolean} counting Redis runs the counting wrapper of it (countingScript)
 */

/** A prepared command as billing sees it. @typedef {{ script?: ScriptCall | undefined }} Billable */

export class ScriptBilling {
  /** @type {Map<string, number>} script SHA → inner commands of its last counted call */
  #lastCount = new Map();
  #scriptCalls = 0;
  #counted = 0;
  #innerCommands = 0;

  /**
   * Commands charged on arrival: 1, or for a script call 1 + its estimate.
   * @param {Billable} prepared
   */
  estimate(prepared) {
    if (!prepared.script) return 1;
    return 1 + (this.#lastCount.get(prepared.script.sha) ?? DEFAULT_SCRIPT_ESTIMATE);
  }

  /**
   * After Redis answered: the reply the client expects, and the commands billed beyond the
   * estimate (negative when fewer; 0 when the count is not known and the estimate stands).
   * @param {Billable} prepared
   * @param {Reply} reply
   * @returns {{ reply: Reply, delta: number }}
   */
  settle(prepared, reply) {
    const script = prepared.script;
    if (!script) return { reply, delta: 0 };
    this.#scriptCalls++;
    const estimate = this.estimate(prepared) - 1;
    if (!script.counting) {
      this.#innerCommands += estimate;
      return { reply, delta: 0 };
    }
    const { reply: answer, calls } = unwrapCounted(reply);
    if (calls === undefined) {
      this.#innerCommands += estimate;
      return { reply: answer, delta: 0 };
    }
    this.#counted++;
    this.#innerCommands += calls;
    // A NOSCRIPT (nothing ran, 0) says nothing of what the script makes when it runs.
    if (!(reply instanceof RedisReplyError)) this.#remember(script.sha, calls);
    return { reply: answer, delta: calls - estimate };
  }

  /** Script calls answered, how many of them were counted exactly, and their inner commands. */
  stats() {
    return {
      scriptCalls: this.#scriptCalls,
      countedScriptCalls: this.#counted,
      scriptInnerCommands: this.#innerCommands,
    };
  }

  /** @param {string} sha @param {number} calls */
  #remember(sha, calls) {
    this.#lastCount.delete(sha); // re-inserted last: the most recently used is kept longest
    if (this.#lastCount.size >= MAX_REMEMBERED) {
      const oldest = this.#lastCount.keys().next().value;
      if (oldest !== undefined) this.#lastCount.delete(oldest);
    }
    this.#lastCount.set(sha, calls);
  }
}
