import { STAMP_AHEAD_MAX_MS } from "../keys";
import { RING_HEADER_LUA } from "./ring-header.lua";
import { compileRingState } from "./ring-state";

/** Bytes of a ring's header: 31 of fields, 16 of the default read's range as text. */
export const RING_HEADER_BYTES = 47;

/** How much of a large ring a decision reads first: its header and the slots after it. */
const RING_PREFIX_BYTES = 1024;
const RING_PREFIX_SLOTS = Math.floor((RING_PREFIX_BYTES - RING_HEADER_BYTES) / 4);

/** The first byte of a ring ('S'; 'R' marked the 31-byte header of an unreleased build). */
const RING_MARK = 83;

/**
 * The ring layout of the exact log, as Lua shared by the log's fragment and the peek. Composed
 * once into any script that holds the log (scripts.ts).
 *
 * A ring is one Redis string: a 47-byte header, then L + 1 slots of 4 bytes (L = the limit). L
 * slots hold the last L admission times (ms after the header's base, big-endian; 0 is an empty
 * slot); the one more is the gap, marked FF FF FF FF (never a time), which sits just before the
 * oldest slot. An admission of c overwrites the c oldest slots and moves the gap after them: the
 * c times and the marker are contiguous, so the write is one SETRANGE of c + 1 slots, and the
 * header need not change — where the gap is is in the data, found with a plain string.find.
 *
 *   byte 1       'S' (the layout's mark; anything else at a log key is not a ring)
 *   bytes 2–5    L, the number of times it holds: its capacity, the largest limit it serves (a
 *                lower limit decides on its newest slots, ring-reads.lua.ts)
 *   bytes 6–9    g0: where the gap was when the header was last written. It is rewritten once the
 *                gap has moved GAP_DRIFT slots on, so a large ring finds the gap by reading from g0
 *                only a short range (GETRANGE) it reads anyway for the slots after the gap
 *   bytes 10–13  e: a hint, how many of the oldest slots had left the window then
 *   bytes 14–19  base (ms): slot times are base + value; values stay below 2^32 - 1 (49 days) by
 *                rebuilding the ring at a newer base when a time would not fit
 *   bytes 20–25  top (ms): the newest time when the header was written
 *   bytes 26–31  exp (ms): until when the key's TTL was last set (renewed to top + 2 windows when
 *                a time + window passes it: one PEXPIRE and header write per window, not per
 *                admission)
 *   bytes 32–33  the lengths of the next two texts (0: none)
 *   bytes 34–47  the byte offsets, as decimal text, of the range a decision of cost 1 reads
 *                (READ_SPAN), then spaces
 *
 * Measured in Redis 7 (a Lua loop): reading the header with one string.byte takes ~0.3 µs, where a
 * decimal header's string.match took 1.5; a SETRANGE plus the header's encoding ~1.5 µs, which the
 * gap saves on most admissions. 4 bytes per admitted unit: 4 035 B of data at limit 1 000, where
 * the seeds' sorted set (retired) kept ~118 kB. Pure Lua 5.1, no struct or bit library: it runs wherever EVAL does.
 */
export const RING_CODEC_LUA = compileRingState(`
local RING_HDR = ${RING_HEADER_BYTES}
local RING_HDR_LAST = '${RING_HEADER_BYTES - 1}'
local RING_MARK = ${RING_MARK}
-- Rings up to this size (limit ≤ 1 028) are read whole (GET): an admission is TIME, GET,
-- SETRANGE, the floor of an exact log on the Redis clock. Reading 4 kB whole costs Redis about
-- what the header and range reads it replaces did (node scripts/measure-ring-cost.mjs).
local RING_WHOLE_MAX = 4160
local RING_WHOLE_LAST = '4159'
-- Larger rings are first read this far (GETRANGE): the header and the slots after it, so a ring
-- still growing (a key far under a large limit) is read whole and a gap near the start needs no
-- second read; otherwise a short range from where the header saw the gap (one GETRANGE more).
-- Literals, as every constant here: the scripts' constants are folded (fold-constants.ts), and a
-- computed one would stay a local that every closure using it captures on each call.
local RING_PREFIX = ${RING_PREFIX_BYTES}
local RING_PREFIX_LAST = '${RING_PREFIX_BYTES - 1}'
local RING_PREFIX_SLOTS = ${RING_PREFIX_SLOTS}
-- A large ring whose live units fill at most this many slots is rewritten compact (its live
-- times, then the gap) when a write would take it past its first read, or at the end of a lap.
local RING_COMPACT_MAX = ${Math.floor(RING_PREFIX_SLOTS / 2)}
-- The largest ring (slots) a lap rewrite checks for compaction: a scan of every slot.
local RING_COMPACT_LAP_MAX = 16385
local RING_GAP = '\\255\\255\\255\\255'
local RING_GAP_VALUE = 4294967295
local RING_VALUE_MAX = 4294967294
-- How far the gap may move before the header is rewritten (large rings read GAP_DRIFT slots more).
local GAP_DRIFT = 16

local function u32(s, i)
  local a, b, c, d = string.byte(s, i, i + 3)
  if not d then return 0 end -- past the end of the string: a slot never written
  return ((a * 256 + b) * 256 + c) * 256 + d
end
-- Where the gap is among the slots of s that start at byte \`from\` (its slot index from there), nil
-- if there is none.
local function ringGapIn(s, from)
  local at = from
  while true do
    at = string.find(s, RING_GAP, at, true)
    if not at then return nil end
    if (at - from) % 4 == 0 then return (at - from) / 4 end
    at = at + 1
  end
end

-- What only conversions, resizes and header writes need, built on first use in a call. Every
-- function a script defines is a closure made again on each EVALSHA (measured in Redis 7: ~0.04 µs
-- each, plus ~0.01 per upvalue), and most decisions need none of these.
local CODEC
local function codec()
  if CODEC then return CODEC end
  local C = {}
${RING_HEADER_LUA}  function C.isRing(s)
    return type(s) == 'string' and #s >= RING_HDR and string.byte(s, 1) == RING_MARK
  end

  -- Every time in a whole ring string later than floor, oldest first (sorted: the caller clock and
  -- lease stamps can write times out of order). With \`most\`: nil as soon as there are more than
  -- that many (compaction asks only whether few are live: a full ring of 100 000 is not sorted
  -- to learn that it is not).
  function C.ringTimes(s, floor, most)
    local L, _, _, base = C.ringFields(s)
    local times = {}
    -- Slots past the string's end (a ring still growing) are empty: not read one by one.
    local last = math.min(L, math.floor((#s - RING_HDR) / 4) - 1)
    for i = 0, last do
      local v = u32(s, RING_HDR + 4 * i + 1)
      if v > 0 and v < RING_GAP_VALUE and base + v > floor then
        times[#times + 1] = base + v
        if most and #times > most then return nil end
      end
    end
    table.sort(times)
    return times
  end

  -- A ring holding the newest L of times (sorted, all later than now - window): the gap first, then
  -- the empty slots, then the times, oldest first. Builds r's whole string (r.whole); written by
  -- the caller when it commits, or as it is when the call is denied (the report).
  function C.ringBuild(r, times, now, window)
    local L = r.L
    local first = math.max(1, #times - L + 1)
    local base = math.max(0, now - window)
    if times[first] and times[first] <= base then base = math.max(0, times[first] - 1) end
    local parts = { RING_GAP, string.rep('\\0\\0\\0\\0', L - (#times - first + 1)) }
    local top = 0
    for i = first, #times do
      parts[#parts + 1] = C.p32(math.min(RING_VALUE_MAX, math.max(1, times[i] - base)))
      if times[i] > top then top = times[i] end
    end
    r.gap, r.g0, r.e, r.base, r.top, r.exp = 0, 0, L - (#times - first + 1), base, top, 0
    r.whole = C.ringHeader(r) .. table.concat(parts)
    r.cf, r.cn, r.cd, r.co = 0, L + 1, r.whole, RING_HDR
    r.rebuilt, r.hdr = true, false
  end

  -- A ring grown to r.L slots (a limit above its capacity) from s, a smaller one: its slots, oldest
  -- first, copied as they are (the same base: no time decoded, nothing sorted), then the gap. The
  -- new slots are the oldest and empty: past the string's end, as in a ring still growing, so
  -- they cost no memory until written; empty slots at the old ring's oldest end are dropped
  -- alike. Nothing else is lost: it is written even on a denial (the report). O(its size), once
  -- per growth: measured ~1 ms at 100 000 where decoding and sorting took 60-90 ms.
  function C.ringGrow(r, s, floor, now, window)
    local K, _, _, base, top, exp = C.ringFields(s)
    local gap = ringGapIn(s, RING_HDR + 1)
    if not gap then
      -- No gap (only a ring written by something else): rebuilt from its live times.
      C.ringBuild(r, C.ringTimes(s, floor), now, window)
      r.lossless = true
      return
    end
    local data = C.ringRange(nil, s, K + 1, (gap + 1) % (K + 1), K)
    local lead = string.find(data, '[^%z]')
    if lead then data = string.sub(data, lead - (lead - 1) % 4) else data = '' end
    local m = #data / 4
    r.gap, r.g0, r.e, r.base, r.top, r.exp = m, m, r.L - m, base, top, exp
    r.whole = C.ringHeader(r) .. data .. RING_GAP
    r.cf, r.cn, r.cd, r.co = 0, r.L + 1, r.whole, RING_HDR
    r.rebuilt, r.lossless, r.hdr = true, true, false
  end

  -- The ring shrunk to T slots (T >= the call's limit and >= its live slots, the caller counted
  -- them): its newest T slots copied as they are, then the gap; the older ones had left the
  -- window. Written like a grown ring (gap last, empty slots dropped), even on a denial.
  function C.ringShrink(r, key, T)
    local N = r.L + 1
    local data = C.ringRange(key, r.whole, N, (r.gap + 1 + r.L - T) % N, T)
    local lead = string.find(data, '[^%z]')
    if lead then data = string.sub(data, lead - (lead - 1) % 4) else data = '' end
    local m = #data / 4
    if r.hdr then
      local _, _, _, _, top, exp = C.ringFields(r.hdr)
      r.top, r.exp = top, exp
    end
    r.L, r.gap, r.g0, r.e = T, m, m, T - m
    r.whole = C.ringHeader(r) .. data .. RING_GAP
    r.cf, r.cn, r.cd, r.co = 0, T + 1, r.whole, RING_HDR
    r.rebuilt, r.lossless, r.hdr, r.chunks, r.size = true, true, false, nil, false
    r.small = RING_HDR + 4 * (T + 1) <= RING_WHOLE_MAX
  end

  -- The newest time still inside the window among the ring's logical slots [0, top) (0 = its
  -- oldest), read back from top - 1 in ranges that double; nil if none. With the Redis clock a
  -- slot's time is at most STAMP_AHEAD_MAX (a lease's stamp) past any later slot's, so the scan
  -- stops at the first slot empty or older than the window's start by that much: none before it
  -- can be inside. What it reads is what was admitted in those last ms before the window: a few
  -- slots, or none; also returned, how many it read.
  function C.ringOlderLive(r, key, rel, top)
    local N, found, n, read = r.L + 1, nil, 8, 0
    local margin = rel - ${STAMP_AHEAD_MAX_MS}
    while top > 0 do
      if n > top then n = top end
      local data = C.ringRange(key, r.whole, N, (r.gap + 1 + top - n) % N, n)
      for k = n, 1, -1 do
        local v = u32(data, 4 * k - 3)
        if v == 0 or v <= margin then return found, read end
        if v > rel and (not found or v > found) then found = v end
        read = read + 1
      end
      top, n = top - n, 2 * n
    end
    return found, read
  end

  -- A large ring written compact: its live times (sorted, later than the floor), then the gap,
  -- and nothing after it (slots past a string's end read as empty), the form a new ring grows
  -- in. Sets r's header fields; returns the whole string to write.
  function C.ringCompact(r, times)
    local parts = {}
    for i = 1, #times do parts[i] = C.p32(times[i] - r.base) end
    parts[#parts + 1] = RING_GAP
    r.gap, r.g0, r.e = #times, #times, r.L - #times
    return C.ringHeader(r) .. table.concat(parts)
  end

  -- The physical slots [from, from + n) of a ring of N slots (wrapping: two pieces), as bytes: cut
  -- from \`whole\` when it was read whole, else read by range. Slots past the end of a ring still
  -- growing read as empty.
  function C.ringRange(key, whole, N, from, n)
    local parts, a = {}, from
    while n > 0 do
      local k = n
      if a + k > N then k = N - a end
      local bytes
      if whole then
        bytes = string.sub(whole, RING_HDR + 4 * a + 1, RING_HDR + 4 * (a + k))
      else
        bytes = redis.call('GETRANGE', key, RING_HDR + 4 * a, RING_HDR + 4 * (a + k) - 1)
      end
      if #bytes < 4 * k then bytes = bytes .. string.rep('\\0', 4 * k - #bytes) end
      parts[#parts + 1] = bytes
      a, n = 0, n - k
    end
    return table.concat(parts)
  end
  CODEC = C
  return C
end
`);
