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
 * This file holds the layout and the writes; plan-reads.ts the reads.
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
 * ~3.1 MiB of heap (`node --expose-gc bench/measure/network-blocks-bench.mjs`).
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

/** Runs a plans script on the clock `options` names (the store's unless it refuses TIME). */
export function onClock<T>(
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

// The runner passes the caller's clock there when the store refuses TIME (clock-slots.ts).
clockedScript(PLAN_SET_SCRIPT, LAST_ARG);

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
