/**
 * How many concurrency slots a policy holds now, over all its keys (an admin read: the stats
 * route), by a bounded scan of its sets. Not on any request's path; one key's count is (a
 * reshard's transition reads a moved key's old set).
 */
import { clockedScript } from "./clock-slots";
import { storageKey } from "./keys";
import { CLOCK_LUA } from "./lua/clock.lua";
import { IN_FLIGHT_LUA } from "./lua/in-flight.lua";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

const IN_FLIGHT_SCRIPT = clockedScript(IN_FLIGHT_LUA, 0);

/** Keys one scan step looks at; a step is one script call. */
const SCAN_COUNT = 1_000;

/** A policy's slots in flight now. */
export interface InFlightCount {
  policy: string;
  /** Live slots over every key the scan met. */
  inFlight: number;
  /** Keys holding at least one live slot. */
  keys: number;
  /** False when the scan stopped at its bound before it had met every key: a lower bound. */
  complete: boolean;
}

/** Redis glob characters, escaped: a prefix is the operator's string. */
const escapeGlob = (text: string) => text.replace(/[*?[\]\\]/g, "\\$&");

/** Scans at most `maxSteps` steps of SCAN_COUNT keys for `policy`'s sets. */
export async function countInFlight(
  client: ScriptClient,
  prefix: string,
  policy: string,
  now: number | undefined,
  maxSteps = 20,
): Promise<InFlightCount> {
  // Every set of the policy: its key with the client key's part as a wildcard.
  const pattern = `${escapeGlob(storageKey(prefix, policy, "", "concurrency").slice(0, -2))}{*}`;
  let cursor = "0";
  let inFlight = 0;
  let keys = 0;
  for (let step = 0; step < maxSteps; step++) {
    const reply = await runScript<unknown>(
      client,
      IN_FLIGHT_SCRIPT,
      [],
      [now ?? "", pattern, cursor, SCAN_COUNT],
    );
    if (!Array.isArray(reply) || reply.length !== 3) {
      throw new StoreReplyError(`unexpected in-flight reply: ${JSON.stringify(reply)}`);
    }
    const [next, sets, slots] = reply as [unknown, unknown, unknown];
    keys += Number(sets);
    inFlight += Number(slots);
    cursor = String(next);
    if (cursor === "0") return { policy, inFlight, keys, complete: true };
  }
  return { policy, inFlight, keys, complete: false };
}

// KEYS[1] a concurrency key's set; ARGV[1] the caller's clock in ms, or "" for the Redis clock.
// Returns its live slots. Commands: TIME (unless the caller's clock), ZCOUNT.
const KEY_SLOTS_SCRIPT = clockedScript(
  `#!lua flags=allow-key-locking
${CLOCK_LUA}local now = clock(ARGV[1])
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`,
  0,
);

/**
 * The live slots of one concurrency key (a reshard reads a moved key's old set with it): one
 * script call. Throws on a store failure.
 */
export async function countKeySlots(
  client: ScriptClient,
  redisKey: string,
  now: number | undefined,
): Promise<number> {
  const reply = await runScript<unknown>(client, KEY_SLOTS_SCRIPT, [redisKey], [now ?? ""]);
  if (typeof reply !== "number" || !Number.isSafeInteger(reply) || reply < 0) {
    throw new StoreReplyError(`unexpected slot count reply: ${JSON.stringify(reply)}`);
  }
  return reply;
}
