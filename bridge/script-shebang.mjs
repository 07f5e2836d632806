// @ts-check
// Lets scripts written for Upstash run on stock Redis.
//
// Upstash runs a script without its database-wide lock when the first line is
// `#!lua flags=allow-key-locking`; stock Redis 7 rejects that unknown flag. So on EVAL, EVAL_RO
// and SCRIPT LOAD the flag is dropped (`#!lua` and any other flags stay). Redis then knows the
// script by the SHA1 of the rewritten text, while clients (@upstash/ratelimit, our store) call
// EVALSHA with the SHA1 of the text they hold: remember original → rewritten and translate
// EVALSHA, EVALSHA_RO and SCRIPT EXISTS, and answer SCRIPT LOAD with the original SHA, which is
// what the client compares against. An unknown SHA passes through: Redis answers NOSCRIPT and the
// client falls back to EVAL, which teaches us the mapping again (after a bridge restart, say).
//
// While the bridge counts scripts' commands (a command cap is set: script-billing.mjs), every
// script is rewritten the same way, into its counting wrapper, and every SHA mapped likewise.

import { createHash } from "node:crypto";
import { countingScript } from "./script-billing.mjs";

const UPSTASH_ONLY_FLAG = "allow-key-locking";
/** Bound on remembered scripts; the oldest is forgotten first (it re-learns via NOSCRIPT). */
const MAX_REMEMBERED = 10_000;

/** @typedef {import("./resp-connection.mjs").Reply} Reply */
/** @typedef {import("./script-billing.mjs").ScriptCall} ScriptCall */

/**
 * A command ready for Redis, and how to turn Redis's reply into the one the client expects.
 * @typedef {object} Prepared
 * @property {string[]} command
 * @property {(reply: Reply) => Reply} fixReply
 * @property {ScriptCall} [script] the script an EVAL / EVALSHA calls (what billing needs)
 */

/** @param {Reply} reply */
const asIs = (reply) => reply;

/** @param {string} text */
function sha1(text) {
  return createHash("sha1").update(text, "utf8").digest("hex");
}

/**
 * The script without the Upstash-only flag, or null when there is nothing to change.
 * @param {string} script
 * @returns {string | null}
 */
export function stripUpstashFlags(script) {
  if (!script.startsWith("#!")) return null;
  const newline = script.indexOf("\n");
  const firstLine = newline < 0 ? script : script.slice(0, newline);
  const match = /([ \t]+)flags=([^ \t\r]*)/.exec(firstLine);
  if (!match) return null;
  const flags = (match[2] ?? "").split(",");
  const kept = flags.filter((flag) => flag !== UPSTASH_ONLY_FLAG);
  if (kept.length === flags.length) return null;
  const replacement = kept.length > 0 ? `${match[1]}flags=${kept.join(",")}` : "";
  const line =
    firstLine.slice(0, match.index) + replacement + firstLine.slice(match.index + match[0].length);
  return newline < 0 ? line : line + script.slice(newline);
}

export class ScriptShebangRewriter {
  /** @type {Map<string, string>} SHA1 of the client's text → SHA1 of the text Redis holds */
  #rewrittenSha = new Map();
  #counting;

  /** @param {{ countCalls?: boolean }} [options] countCalls: send scripts in their counting wrapper */
  constructor({ countCalls = false } = {}) {
    this.#counting = countCalls;
  }

  /**
   * @param {string[]} command as received (name first)
   * @returns {Prepared}
   */
  prepare(command) {
    const name = (command[0] ?? "").toLowerCase();
    switch (name) {
      case "eval":
      case "eval_ro": {
        const { command: rewritten, originalSha } = this.#withScriptAt(command, 1);
        // Counting, every script is rewritten, so its SHA is known; otherwise it is not needed.
        const sha = originalSha ?? "";
        return { command: rewritten, fixReply: asIs, script: { sha, counting: this.#counting } };
      }
      case "evalsha":
      case "evalsha_ro": {
        const rewritten = this.#withShaAt(command, [1]);
        // Counting, a known SHA is a wrapped script; an unknown one runs as Redis holds it.
        const counting = this.#counting && rewritten !== command;
        const sha = (command[1] ?? "").toLowerCase();
        return { command: rewritten, fixReply: asIs, script: { sha, counting } };
      }
      case "script": {
        const sub = command[1]?.toLowerCase();
        if (sub === "load") {
          const { command: rewritten, originalSha } = this.#withScriptAt(command, 2);
          if (originalSha === null) return { command, fixReply: asIs };
          // Redis answers with the rewritten text's SHA; the client expects its own.
          const fixReply = (/** @type {Reply} */ reply) =>
            Buffer.isBuffer(reply) ? Buffer.from(originalSha, "latin1") : reply;
          return { command: rewritten, fixReply };
        }
        if (sub === "exists") {
          const positions = command.map((_, i) => i).slice(2);
          return { command: this.#withShaAt(command, positions), fixReply: asIs };
        }
        return { command, fixReply: asIs };
      }
      default:
        return { command, fixReply: asIs };
    }
  }

  /**
   * @param {string[]} command
   * @param {number} at index of the script text
   * @returns {{ command: string[], originalSha: string | null }}
   */
  #withScriptAt(command, at) {
    const script = command[at];
    const rewritten = script === undefined ? null : this.#rewrite(script);
    if (script === undefined || rewritten === null) return { command, originalSha: null };
    const originalSha = sha1(script);
    this.#remember(originalSha, sha1(rewritten));
    const copy = command.slice();
    copy[at] = rewritten;
    return { command: copy, originalSha };
  }

  /**
   * @param {string[]} command
   * @param {number[]} positions indexes holding SHAs
   */
  #withShaAt(command, positions) {
    let copy = command;
    for (const at of positions) {
      const sha = command[at];
      const known = sha === undefined ? undefined : this.#rewrittenSha.get(sha.toLowerCase());
      if (known !== undefined) {
        if (copy === command) copy = command.slice();
        copy[at] = known;
      }
    }
    return copy;
  }

  /** The text Redis is to run, or null when it is the client's own. @param {string} script */
  #rewrite(script) {
    const stripped = stripUpstashFlags(script);
    return this.#counting ? countingScript(stripped ?? script) : stripped;
  }

  /** @param {string} originalSha @param {string} rewrittenSha */
  #remember(originalSha, rewrittenSha) {
    if (this.#rewrittenSha.has(originalSha)) return;
    if (this.#rewrittenSha.size >= MAX_REMEMBERED) {
      const oldest = this.#rewrittenSha.keys().next().value;
      if (oldest !== undefined) this.#rewrittenSha.delete(oldest);
    }
    this.#rewrittenSha.set(originalSha, rewrittenSha);
  }
}
