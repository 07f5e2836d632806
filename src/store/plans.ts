/**
 * Plans: what an operator changes at run time without a deploy (docs/plans.md).
 *
 * Two hashes per prefix:
 * - `<prefix>:plans`: a policy's limit override for one client key (`o|<policy>|<key>` → limit)
 *   and a key block (`b|<policy>|<key>` → until). The evaluate script of a policy with
 *   `overrides` reads both with one HMGET (lua/scripts.ts): no extra round trip.
 * - `<prefix>:blocks`: network blocks (`ip|<policy or *>|<cidr>`, `country|…|<CC>`,
 *   `asn|…|<number>` → until), which every isolate copies and refreshes (net/network-blocks.ts):
 *   they are matched before any key is known.
 * `until` is the store's clock in ms when the block ends; 0: until it is removed. Client keys are
 * encoded as in Redis keys (encodeKeyPart): no `|` in them, so a field splits at its first two.
 */
import { clockedScript, LAST_ARG } from "./clock-slots";
import { encodeKeyPart } from "./keys";
import { CLOCK_LUA } from "./lua/clock.lua";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";
import { type ClockSource, reportClockChange, runOnClock, storeClockOf } from "./store-clock";

export function plansKey(prefix: string): string {
  return `${prefix}:plans`;
}

export function networkBlocksKey(prefix: string): string {
  return `${prefix}:blocks`;
}

/** Most fields in `<prefix>:plans` (overrides and key blocks). */
export const MAX_PLAN_ENTRIES = 100_000;
/**
 * Most bytes of field names and values in `<prefix>:plans`, counted in its PLAN_BYTES_FIELD. The
 * entry cap alone does not bound memory: a field holds the encoded client key, up to ~4.6 kB for
 * 512 characters outside ASCII, and 100 000 of those took 516 MB of Redis (MEMORY USAGE), where
 * 100 000 header-keyed overrides (a 64-character hash each) take 12 MB and count 7.5 MiB here.
 */
export const MAX_PLAN_BYTES = 16 * 1024 * 1024;
/** The plans hash's byte count: not `o|`/`b|`, so no decision reads it and no listing shows it. */
export const PLAN_BYTES_FIELD = "#bytes";
/** Most bytes of fields and values one listing page gathers before it ends (plus one step's). */
export const PAGE_BYTES = 512 * 1024;

/**
 * Most network blocks: every isolate holds them all. At the cap a read is ~211 KiB and the copy
 * ~3.1 MiB of heap (`node --expose-gc bench/measure/network-blocks.mjs`).
 */
export const MAX_NETWORK_BLOCKS = 10_000;

export type NetworkBlockKind = "ip" | "country" | "asn";

export function overrideField(policy: string, clientKey: string): string {
  return `o|${policy}|${encodeKeyPart(clientKey)}`;
}

export function keyBlockField(policy: string, clientKey: string): string {
  return `b|${policy}|${encodeKeyPart(clientKey)}`;
}

/** A network block's field; `policy` undefined: every rule. */
export function networkBlockField(
  kind: NetworkBlockKind,
  value: string,
  policy: string | undefined,
): string {
  return `${kind}|${policy ?? "*"}|${value}`;
}

// Every script here reads the clock first (TIME, or the caller's ms in its last ARGV): a store
// that refuses TIME in scripts refuses before anything is read or written (store-clock.ts).

/** Whose clock a plans script runs on: the store's, unless it refuses TIME or "caller" is asked. */
export interface PlanClock {
  /** The object the store's clock state is kept by (storeClockOf). @default the client */
  clockOf?: object | undefined;
  /** "caller": always this isolate's clock. @default "redis" */
  clock?: ClockSource | undefined;
}

function onClock<T>(
  client: ScriptClient,
  options: PlanClock,
  call: (client: ScriptClient, now: number | undefined) => Promise<T>,
): Promise<T> {
  const state = storeClockOf(options.clockOf ?? client);
  return runOnClock(
    {
      state,
      caller: options.clock === "caller",
      now: Date.now,
      onSwitch: () => reportClockChange(state),
    },
    client,
    call,
  );
}

/**
 * Sets (or, with value "", removes) some fields to one value, all or none: a key blocked in every
 * rule is one field a rule, and a refusal must leave none of them written. `ttl` > 0 stores the
 * store's now + ttl (a block's end) instead of `value`. New fields past `max` are refused ({-1});
 * with `maxBytes` > 0 the hash counts its fields' and values' bytes in PLAN_BYTES_FIELD (not an
 * entry: HLEN less it) and a write past `maxBytes` is refused ({-2}); a removal, or a write that
 * does not grow, always passes. ARGV: value, max, ttl, maxBytes, n, n fields, the caller's now.
 * Returns {fields that existed, size}.
 */
const PLAN_SET_SCRIPT = `${CLOCK_LUA}
local value, max, ttl, maxBytes, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local now = 0
if ttl > 0 then now = clock(ARGV[6 + n]) end
local counter = '${PLAN_BYTES_FIELD}'
local size = redis.call('HLEN', KEYS[1])
if maxBytes > 0 then size = size - redis.call('HEXISTS', KEYS[1], counter) end
local present, existed, old = {}, 0, 0
for i = 1, n do
  local field = ARGV[5 + i]
  present[i] = redis.call('HEXISTS', KEYS[1], field)
  existed = existed + present[i]
  if present[i] == 1 and maxBytes > 0 then
    old = old + #field + redis.call('HSTRLEN', KEYS[1], field)
  end
end
-- Fields written before the count existed were never added to it: it never goes below 0.
local function count(delta)
  if redis.call('HINCRBY', KEYS[1], counter, delta) < 0 then redis.call('HSET', KEYS[1], counter, 0) end
end
if value == '' then
  if existed > 0 then
    for i = 1, n do
      if present[i] == 1 then redis.call('HDEL', KEYS[1], ARGV[5 + i]) end
    end
    if maxBytes > 0 then count(-old) end
  end
  return {existed, size - existed}
end
local fresh = n - existed
if fresh > 0 and size + fresh > max then return {-1, size} end
if ttl > 0 then value = tostring(now + ttl) end
if maxBytes > 0 then
  local grow = -old
  for i = 1, n do grow = grow + #ARGV[5 + i] + #value end
  local bytes = tonumber(redis.call('HGET', KEYS[1], counter)) or 0
  if grow > 0 and bytes + grow > maxBytes then return {-2, size} end
  count(grow)
end
for i = 1, n do redis.call('HSET', KEYS[1], ARGV[5 + i], value) end
return {existed, size + fresh}
`;

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
for (const script of [PLAN_SET_SCRIPT, PLAN_LIST_SCRIPT, PLAN_READ_SCRIPT, NETWORK_READ_SCRIPT]) {
  clockedScript(script, LAST_ARG);
}

export interface PlanWrite extends PlanClock {
  /** The hash: plansKey or networkBlocksKey. */
  hash: string;
  /** The field, or several written all or none. */
  field: string | readonly string[];
  /** The value, or null to remove the field. */
  value: string | null;
  /** A block's life (ms): stored as the store's now + this. */
  ttlMs?: number | undefined;
  /** Most fields the hash may hold. */
  max: number;
  /** Most bytes of fields and values the hash may hold (counted in it); 0: not counted. */
  maxBytes?: number | undefined;
}

export interface PlanWriteAnswer {
  /** The field (one of the fields) existed before. */
  existed: boolean;
  /** A new field was refused: the hash holds `max` already. */
  full: boolean;
  /** The write was refused: it would take the hash past `maxBytes`. */
  fullBytes: boolean;
  size: number;
}

export async function writePlan(client: ScriptClient, write: PlanWrite): Promise<PlanWriteAnswer> {
  const fields = typeof write.field === "string" ? [write.field] : write.field;
  const reply = await onClock(client, write, (clocked, now) =>
    runScript<unknown>(
      clocked,
      PLAN_SET_SCRIPT,
      [write.hash],
      [
        write.value ?? "",
        write.max,
        write.ttlMs ?? 0,
        write.maxBytes ?? 0,
        fields.length,
        ...fields,
        now ?? "",
      ],
    ),
  );
  if (!Array.isArray(reply) || reply.length !== 2 || !reply.every((v) => typeof v === "number")) {
    throw new StoreReplyError(`unexpected plan reply: ${JSON.stringify(reply)}`);
  }
  const [existed, size] = reply as [number, number];
  return { existed: existed > 0, full: existed === -1, fullBytes: existed === -2, size };
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
): Promise<{ now: number; limit: number | undefined; blockedUntil: number | undefined }> {
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
    limit: limit === "" ? undefined : Number(limit),
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
