/**
 * The ring layout of the exact log, as Lua shared by both log fragments (the ring reads it; the
 * sorted set reads it to convert a ring it meets when a rule's algorithm changed) and the peek.
 * Composed once into any script that holds a log (scripts.ts).
 *
 * A ring is one Redis string: a 31-byte header, then `L` slots of 4 bytes (L = the limit), each an
 * admission time as ms after the header's base, big-endian; 0 is an empty slot.
 *
 *   byte 1       'R' (the layout's mark; anything else at a log key is not a ring)
 *   bytes 2–5    L, the number of slots (the limit the ring was built for)
 *   bytes 6–9    head: the slot to overwrite next, which holds the oldest of the last L admissions
 *   bytes 10–13  a hint: how many slots from the head had left the window at the last admission
 *   bytes 14–19  base (ms): slot times are base + value; values stay below 2^32 (49 days) by
 *                rebuilding the ring at a newer base when a time would not fit
 *   bytes 20–25  top (ms): the newest time written (the key lives until top + window)
 *   bytes 26–31  exp (ms): large rings only, until when the key's TTL was last set
 *
 * 4 bytes per admitted unit: 4 031 B of data at limit 1 000, where the sorted set keeps ~118 kB.
 * Pure Lua 5.1 (string.byte/char), no struct or bit library: it runs wherever EVAL does.
 */
export const RING_CODEC_LUA = `
local RING_HDR = 31
-- Rings up to this size are read whole (GET) and written whole (SET … PX): three commands for an
-- admission (TIME, GET, SET). Larger rings read and write only the slots they need (GETRANGE,
-- SETRANGE), so an admission costs O(cost) whatever the limit.
local RING_WHOLE_MAX = 1024
local RING_VALUE_MAX = 4294967295

local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  if not d then return 0 end -- past the end of the string: a slot never written
  return ((a * 256 + b) * 256 + c) * 256 + d
end
local function u48(s, i)
  return u32(s, i) * 65536 + string.byte(s, i + 4) * 256 + string.byte(s, i + 5)
end
local function p32(v)
  return string.char(math.floor(v / 16777216) % 256, math.floor(v / 65536) % 256,
    math.floor(v / 256) % 256, v % 256)
end
local function p48(v)
  return p32(math.floor(v / 65536)) .. string.char(math.floor(v / 256) % 256, v % 256)
end

local function ringHeader(r)
  return 'R' .. p32(r.L) .. p32(r.head) .. p32(r.e) .. p48(r.base) .. p48(r.top) .. p48(r.exp)
end
local function isRing(s)
  return s and #s >= RING_HDR and string.byte(s, 1) == 82
end

-- Every time in a whole ring string later than floor, oldest first (sorted: the caller clock and
-- lease stamps can write times out of order).
local function ringTimes(s, floor)
  local L, head, base = u32(s, 2), u32(s, 6), u48(s, 14)
  local times = {}
  for j = 0, L - 1 do
    local v = u32(s, RING_HDR + 4 * ((head + j) % L) + 1)
    if v > 0 and base + v > floor then times[#times + 1] = base + v end
  end
  table.sort(times)
  return times
end

-- A ring of L slots holding the newest L of times (sorted, all later than now - window): empty
-- slots at the head, then the times, oldest first. Builds r's whole string (r.whole); written by
-- the caller when it commits.
local function ringBuild(r, times, now, window)
  local L = r.L
  local first = math.max(1, #times - L + 1)
  local base = math.max(0, now - window)
  if times[first] and times[first] <= base then base = math.max(0, times[first] - 1) end
  local parts = { string.rep('\\0\\0\\0\\0', L - (#times - first + 1)) }
  local top = 0
  for i = first, #times do
    parts[#parts + 1] = p32(math.min(RING_VALUE_MAX, math.max(1, times[i] - base)))
    if times[i] > top then top = times[i] end
  end
  r.head, r.e, r.base, r.top, r.exp = 0, L - (#times - first + 1), base, top, 0
  r.whole = ringHeader(r) .. table.concat(parts)
  r.rebuilt = true
end

-- The times of a sorted-set log later than now - window, oldest first.
local function zsetTimes(key, now, window)
  local flat = redis.call('ZRANGEBYSCORE', key, '(' .. (now - window), '+inf', 'WITHSCORES')
  local times = {}
  for i = 2, #flat, 2 do times[#times + 1] = tonumber(flat[i]) end
  return times
end
`;
