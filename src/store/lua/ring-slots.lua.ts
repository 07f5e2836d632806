import { compileRingState } from "./ring-state";

/**
 * A ring's slots as a decision reads them (ring-codec.lua.ts has the layout): one slot, from
 * what was read or by range, and the frontier, how many of the oldest have left the window.
 * Reads only; ring-reads.lua.ts's check calls them, and the ring's fragment
 * (sliding-log-ring.lua.ts) composes the two.
 */
export const RING_SLOTS_LUA = compileRingState(`
-- Slot j of the decision (0 = the oldest its limit counts) is logical slot r.o + j of the ring (0 =
-- its oldest), physical slot (gap + 1 + r.o + j) mod (L + 1). What was read is one range (r.cf,
-- r.cn, r.cd, r.co: first physical slot, count, bytes, offset; a whole ring is the range of all
-- its slots, a fresh one all empty), and a large ring's other reads in r.chunks.
local function ringSlot(r, key, j)
  local N = r.L + 1
  local i = (r.gap + 1 + r.o + j) % N
  local k = (i - r.cf) % N
  if k < r.cn then
    -- u32, inline: this runs for every slot a decision looks at.
    local a, b, c, d = string.byte(r.cd, r.co + 4 * k + 1, r.co + 4 * k + 4)
    if not d then return 0 end -- past the end of a ring still growing: never written
    return ((a * 256 + b) * 256 + c) * 256 + d
  end
  -- Among the slots of a large ring's first read (kept as r.hdr: the header and what follows).
  if i < RING_PREFIX_SLOTS and r.hdr and #r.hdr == RING_PREFIX then return u32(r.hdr, RING_HDR + 4 * i + 1) end
  if r.chunks then
    for _, c in ipairs(r.chunks) do
      if i >= c.from and i < c.from + c.n then return u32(c.data, 4 * (i - c.from) + 1) end
    end
  end
  -- Past the end of a ring still growing: never written.
  if r.size and RING_HDR + 4 * i >= r.size then return 0 end
  local data = redis.call('GETRANGE', key, RING_HDR + 4 * i, RING_HDR + 4 * i + 3)
  r.chunks = r.chunks or {}
  r.chunks[#r.chunks + 1] = { from = i, n = 1, data = data }
  return u32(data, 1)
end

-- The number of slots from the oldest (the decision's slots: from r.o), among the first n, that
-- have left the window (the first one still inside it), from a hint (counted from the same
-- slot): gallop from the hint, then binary search. One function, not three (a probe, a
-- prefetch): each function is a closure made on every call of the script.
local function ringFrontier(r, key, n, hint, floor)
  if hint > n then hint = n end
  if hint < 0 then hint = 0 end
  local N, rel = r.L + 1, floor - r.base
  if r.cn < N and hint > 0 and hint < r.L - r.o then
    -- A hint far from the range read (a large ring mostly free, or mostly in use): the first
    -- probes (the hint's two slots and the gallop's next few) in one more range, not one GETRANGE
    -- each. Never for a ring read whole, new or rebuilt (cn = N: every slot is at hand).
    local i = (r.gap + r.o + hint) % N
    -- Nor when those slots are among the first read's, or past a growing ring's end.
    local near = (i - r.cf) % N + 10 <= r.cn
      or (i + 10 <= RING_PREFIX_SLOTS and r.hdr and #r.hdr == RING_PREFIX)
      or (r.size and RING_HDR + 4 * i >= r.size)
    if not near then
      local m = 10
      if i + m > N then m = N - i end
      r.chunks = { { from = i, n = m,
        data = redis.call('GETRANGE', key, RING_HDR + 4 * i, RING_HDR + 4 * (i + m) - 1) } }
    end
  end
  -- A slot has left the window when it is empty (0) or its time is at or before floor.
  local lo, hi = 0, n
  local v = hint > 0 and ringSlot(r, key, hint - 1)
  if v and v ~= 0 and v > rel then
    hi = hint - 1
  else
    lo = hint
    local step = 1
    while lo < hi do
      local probe = lo + step - 1
      if probe > hi - 1 then probe = hi - 1 end
      v = ringSlot(r, key, probe)
      if v == 0 or v <= rel then
        lo, step = probe + 1, step * 2
      else
        hi = probe
        break
      end
    end
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    v = ringSlot(r, key, mid)
    if v == 0 or v <= rel then lo = mid + 1 else hi = mid end
  end
  return lo
end
`);
