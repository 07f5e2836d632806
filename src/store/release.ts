/**
 * The release script call: concurrency slots given back when their requests end (the limiter's
 * `release` calls it; the slots were taken by the evaluate script).
 */
import { clockedScript } from "./clock-slots";
import { RELEASE_LUA } from "./lua/release.lua";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";
import type { ScriptArg } from "./store-clock";

// Its clock is ARGV[1], as every script's that reads TIME must declare.
const RELEASE_SCRIPT = clockedScript(RELEASE_LUA, 0);

/** One slot to give back: its sorted set's Redis key and its member. */
export interface SlotRef {
  redisKey: string;
  slot: string;
}

/**
 * Removes each slot from its set in one script call. Answers, per slot, whether it was held
 * (live: not lapsed at its timeout). Throws on a store failure (the limiter answers that).
 * Redis commands: TIME (unless `now` is given), then per slot ZSCORE and, when there, ZREM.
 */
export async function releaseSlots(
  client: ScriptClient,
  slots: readonly SlotRef[],
  now?: number,
): Promise<boolean[]> {
  if (slots.length === 0) return [];
  const keys = slots.map((slot) => slot.redisKey);
  const args: ScriptArg[] = [now ?? "", ...slots.map((slot) => slot.slot)];
  const reply = await runScript<unknown>(client, RELEASE_SCRIPT, keys, args);
  if (!Array.isArray(reply) || reply.length !== slots.length) {
    throw new StoreReplyError(`unexpected release reply: ${JSON.stringify(reply)}`);
  }
  return reply.map((value) => value === 1);
}
