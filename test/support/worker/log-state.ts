import type { Redis } from "@upstash/redis/cloudflare";
import { RING_HEADER_BYTES } from "../../../src/store/lua/ring-codec.lua";

/**
 * The layouts of the exact log every exactness test runs against: the ring alone since the
 * seeds' sorted set was retired (docs/algorithms.md).
 */
export const LOG_LAYOUTS = ["sliding-log"] as const;
export type LogLayout = (typeof LOG_LAYOUTS)[number];

// Read in Redis: the ring is binary, and the REST client decodes strings as UTF-8. Returns, for a
// ring: {kind 1, L, gap, base, then every slot's time (0 = empty) from the head, oldest first};
// nothing stored: {0}.
const READ_LOG = `
local key = KEYS[1]
local t = redis.call('TYPE', key)['ok']
if t ~= 'string' then return {0} end
local s = redis.call('GET', key)
local function u32(i)
  local a, b, c, d = string.byte(s, i, i + 3)
  if not d then return 0 end
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local L = u32(2)
local base = u32(14) * 65536 + string.byte(s, 18) * 256 + string.byte(s, 19)
-- The gap (FF FF FF FF on a slot boundary) sits just before the oldest slot.
local gap = 0
for i = 0, L do
  if u32(${RING_HEADER_BYTES} + 4 * i + 1) == 4294967295 then gap = i break end
end
local out = {1, L, gap, base}
for j = 0, L - 1 do
  local v = u32(${RING_HEADER_BYTES} + 4 * ((gap + 1 + j) % (L + 1)) + 1)
  out[#out + 1] = v == 0 and 0 or base + v
end
return out
`;

export interface LogState {
  layout: "ring" | "none";
  /** Admission times held (a ring's stamped slots), oldest first. */
  times: number[];
  /** A ring's size (its limit), 0 otherwise. */
  slots: number;
}

/** A log key's state. */
export async function readLog(redis: Redis, key: string): Promise<LogState> {
  const reply = (await redis.eval(READ_LOG, [key], [])) as number[];
  if (reply[0] === 1) {
    return { layout: "ring", slots: reply[1] ?? 0, times: reply.slice(4).filter((t) => t > 0) };
  }
  return { layout: "none", slots: 0, times: [] };
}

/**
 * How many admissions a log key holds: with
 * `floor`, only those later than it (inside a window ending now = floor + window).
 */
export async function logCount(redis: Redis, key: string, floor?: number): Promise<number> {
  const { times } = await readLog(redis, key);
  return floor === undefined ? times.length : times.filter((t) => t > floor).length;
}
