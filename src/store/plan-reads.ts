/**
 * Reading plans (plans.ts has the layout and the writes): one page of a hash, one key's override
 * and block as the decision script reads them, and every network block for the isolates' copies.
 */
import { clockedScript, LAST_ARG } from "./clock-slots";
import { CLOCK_LUA } from "./lua/clock.lua";
import { type KeyPlan, readOverride } from "./override-value";
import {
  keyBlockField,
  networkBlocksKey,
  onClock,
  overrideField,
  PAGE_BYTES,
  PLAN_BYTES_FIELD,
  type PlanClock,
  plansKey,
} from "./plans";
import type { ScriptClient } from "./script-runner";
import { runScript, StoreReplyError } from "./script-runner";

/**
 * One page of a hash's fields matching a glob, and the store's now: HSCAN in steps of at most
 * 100 (COUNT is a hint: a step may answer a few more), as many as one HSCAN COUNT `count` would
 * visit, ending early once `count` entries or PAGE_BYTES are gathered, so a page is about `count`
 * entries and at most PAGE_BYTES plus one step's, whatever the keys' lengths. Blocks seen that
 * have ended are deleted (nothing else reclaims them: a hash field has no TTL in Redis 7.0),
 * their bytes taken off PLAN_BYTES_FIELD. Returns {next cursor, now, field, value, …}.
 */
const PLAN_LIST_SCRIPT = `${CLOCK_LUA}
local now = clock(ARGV[4])
local count = tonumber(ARGV[3])
local step = math.min(count, 100)
local counted = redis.call('HEXISTS', KEYS[1], '${PLAN_BYTES_FIELD}') == 1
local cursor = ARGV[1]
local out = {'0', now}
local bytes, found, steps = 0, 0, math.ceil(count / step)
repeat
  local page = redis.call('HSCAN', KEYS[1], cursor, 'MATCH', ARGV[2], 'COUNT', step)
  cursor = page[1]
  local items = page[2]
  for i = 1, #items, 2 do
    local field, value = items[i], items[i + 1]
    local ends = tonumber(value)
    if string.sub(field, 1, 2) ~= 'o|' and ends and ends > 0 and ends <= now then
      redis.call('HDEL', KEYS[1], field)
      if counted then redis.call('HINCRBY', KEYS[1], '${PLAN_BYTES_FIELD}', -(#field + #value)) end
    else
      out[#out + 1] = field
      out[#out + 1] = value
      bytes = bytes + #field + #value
      found = found + 1
    end
  end
  steps = steps - 1
until cursor == '0' or steps <= 0 or found >= count or bytes >= ${PAGE_BYTES}
out[1] = cursor
return out
`;

/** Two fields of a hash and the store's now: {now, first, second} ('' for an absent field). */
const PLAN_READ_SCRIPT = `${CLOCK_LUA}
local now = clock(ARGV[3])
local got = redis.call('HMGET', KEYS[1], ARGV[1], ARGV[2])
return {now, got[1] or '', got[2] or ''}
`;

/** Every network block and the store's now: {now, field, value, …}. */
const NETWORK_READ_SCRIPT = `${CLOCK_LUA}
local now = clock(ARGV[1])
local out = redis.call('HGETALL', KEYS[1])
table.insert(out, 1, now)
return out
`;

// The runner passes the caller's clock there when the store refuses TIME (clock-slots.ts).
for (const script of [PLAN_LIST_SCRIPT, PLAN_READ_SCRIPT, NETWORK_READ_SCRIPT]) {
  clockedScript(script, LAST_ARG);
}

export interface PlanPage {
  /** "0" when the scan is complete. */
  cursor: string;
  /** The store's clock (ms). */
  now: number;
  entries: { field: string; value: string }[];
}

/** One page of a hash's fields matching `pattern` (a Redis glob), ended blocks left out. */
export async function listPlans(
  client: ScriptClient,
  hash: string,
  cursor: string,
  pattern: string,
  count: number,
  clock: PlanClock = {},
): Promise<PlanPage> {
  const reply = await onClock(client, clock, (clocked, now) =>
    runScript<unknown>(clocked, PLAN_LIST_SCRIPT, [hash], [cursor, pattern, count, now ?? ""]),
  );
  if (!Array.isArray(reply) || reply.length < 2 || reply.length % 2 !== 0) {
    throw new StoreReplyError(`unexpected plan list reply: ${JSON.stringify(reply)}`);
  }
  const entries: PlanPage["entries"] = [];
  for (let i = 2; i < reply.length; i += 2) {
    entries.push({ field: String(reply[i]), value: String(reply[i + 1]) });
  }
  return { cursor: String(reply[0]), now: Number(reply[1]), entries };
}

/** One key's override and key block in one policy, as the decision script reads them. */
export async function readPlan(
  client: ScriptClient,
  prefix: string,
  policy: string,
  clientKey: string,
  clock: PlanClock = {},
): Promise<KeyPlan> {
  const reply = await onClock(client, clock, (clocked, now) =>
    runScript<unknown>(
      clocked,
      PLAN_READ_SCRIPT,
      [plansKey(prefix)],
      [overrideField(policy, clientKey), keyBlockField(policy, clientKey), now ?? ""],
    ),
  );
  if (!Array.isArray(reply) || reply.length !== 3 || typeof reply[0] !== "number") {
    throw new StoreReplyError(`unexpected plan read reply: ${JSON.stringify(reply)}`);
  }
  const [now, limit, block] = reply as [number, unknown, unknown];
  const end = block === "" ? undefined : Number(block);
  return {
    now,
    ...(limit === "" ? { limit: undefined } : readOverride(String(limit))),
    // A block that has ended is no block.
    blockedUntil: end !== undefined && (end === 0 || end > now) ? end : undefined,
  };
}

/** Every network block as stored, and the store's clock when read. */
export async function readNetworkBlocks(
  client: ScriptClient,
  prefix: string,
  clock: PlanClock = {},
): Promise<{ now: number; entries: { field: string; value: string }[] }> {
  const reply = await onClock(client, clock, (clocked, now) =>
    runScript<unknown>(clocked, NETWORK_READ_SCRIPT, [networkBlocksKey(prefix)], [now ?? ""]),
  );
  if (!Array.isArray(reply) || reply.length % 2 !== 1 || typeof reply[0] !== "number") {
    throw new StoreReplyError(`unexpected network blocks reply: ${JSON.stringify(reply)}`);
  }
  const entries: { field: string; value: string }[] = [];
  for (let i = 1; i < reply.length; i += 2) {
    entries.push({ field: String(reply[i]), value: String(reply[i + 1]) });
  }
  return { now: reply[0], entries };
}
