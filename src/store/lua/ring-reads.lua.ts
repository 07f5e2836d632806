import { READ_SPAN } from "./ring-codec.lua";
import { compileRingState, ringStateTable } from "./ring-state";

/**
 * Reading a ring (ring-codec.lua.ts has the layout) for a decision or a peek, never writing: the
 * check (where its gap is, whether a cost fits), its slots from the oldest, and how many of them
 * have left the window. Large rings are read by range (GETRANGE) and keep what they read. Part of
 * the ring's fragment (sliding-log-ring.lua.ts), which writes.
 */
/** The state of a ring read as stored (ringCheck's locals), built when a later step needs it. */
const STATE = ringStateTable({
  L: "L",
  gap: "gap",
  g0: "g0",
  e: "e",
  base: "base",
  cf: "cf",
  cn: "cn",
  cd: "cd",
  co: "co",
  small: "small",
  whole: "whole",
  hdr: "s",
  size: "size",
});

export const RING_READS_LUA = compileRingState(`
-- Logical slot j (0 = the oldest) is physical slot (gap + 1 + j) mod (L + 1). What was read is one
-- range (r.cf, r.cn, r.cd, r.co: first physical slot, count, bytes, offset; a whole ring is the
-- range of all its slots, a fresh one all empty), and a large ring's other reads in r.chunks.
local function ringSlot(r, key, j)
  local N = r.L + 1
  local i = (r.gap + 1 + j) % N
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

-- The number of slots from the oldest, among the first n, that have left the window (the first
-- one still inside it), from a hint: gallop from the hint, then binary search. One function, not
-- three (a probe, a prefetch): each function is a closure made on every call of the script.
local function ringFrontier(r, key, n, hint, floor)
  if hint > n then hint = n end
  if hint < 0 then hint = 0 end
  local N, rel = r.L + 1, floor - r.base
  if r.cn < N and hint > 0 and hint < r.L then
    -- A hint far from the range read (a large ring mostly free, or mostly in use): the first
    -- probes (the hint's two slots and the gallop's next few) in one more range, not one GETRANGE
    -- each. Never for a ring read whole, new or rebuilt (cn = N: every slot is at hand).
    local i = (r.gap + hint) % N
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

-- The ring's check (ALG['sliding-log'].check, for a decision or a peek): loads the ring into
-- p.ring and decides whether p.cost fits; never writes. A missing key, another layout (the sorted
-- set, after the rule's algorithm changed: its newest L live times are carried over) or another
-- limit (rebuilt at the new size from its newest L live times) become r.whole, written on commit
-- or, when the call is denied, by the report. It runs on
-- every decision, so it is one function (each is a closure made on every call of the script),
-- values stay in locals and the state table is built once, whole (an in-script loop measured each
-- field set afterwards, and each helper call, in tenths of a µs).
local function ringCheck(p, now)
  local L, key = p.limit, p.key
  local N = L + 1
  local floor = now - p.window
  p.floor = floor
  local small = RING_HDR + 4 * N <= RING_WHOLE_MAX
  local s
  if small then
    s = redis.pcall('GET', key)
  else
    -- The header's bounds as literals: a number argument is formatted into a new string per call.
    -- The header and the slots after it in one read: a ring still growing (a key far under a
    -- large limit) is all there, and one whose gap is near the start needs no second read.
    s = redis.pcall('GETRANGE', key, '0', RING_PREFIX_LAST)
  end
  -- A missing key reads as false (GET) or '' (GETRANGE). The header's fields a decision needs,
  -- inline (top and exp only when it commits, from r.hdr).
  local stored, g0, e, base, ls, le
  if type(s) == 'string' then
    local m, l1, l2, l3, l4, h1, h2, h3, h4, e1, e2, e3, e4, b1, b2, b3, b4, b5, b6 =
      string.byte(s, 1, 19)
    ls, le = string.byte(s, 32, 33)
    if m == RING_MARK and le then
      stored = ((l1 * 256 + l2) * 256 + l3) * 256 + l4
      g0 = ((h1 * 256 + h2) * 256 + h3) * 256 + h4
      e = ((e1 * 256 + e2) * 256 + e3) * 256 + e4
      base = ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6
    end
  end
  local r, gap, cd, cf, cn, co, whole, size
  if stored ~= L then
    r = ${ringStateTable({ L: "L", gap: "0", g0: "0", e: "L", base: "0", top: "0", exp: "0", cf: "0", cn: "N", cd: "''", co: "0", small: "small" })}
    -- When it keeps everything stored (lossless) it is written even if the call is denied (the
    -- report): paid once, the next call reads a ring of this limit. A lower limit keeps only the
    -- newest L and writes only on an admission: another version of the rule with a higher limit
    -- (a deploy, a /check caller's limit) still counts what a denial would have dropped.
    if type(s) == 'table' then
      local C = codec()
      local times = C.zsetNewest(key, floor, L)
      C.ringBuild(r, times, now, p.window)
      r.lossless = #times < L
    elseif stored then
      if not small then s = redis.call('GET', key) end
      local C = codec()
      C.ringBuild(r, C.ringTimes(s, floor), now, p.window)
      r.lossless = stored < L
    else
      -- No ring yet: every slot is empty. It is written as long as it is used (the header, the
      -- times, the gap) and grows with later writes: a client that sends a few requests under a
      -- large limit costs bytes for those few, not for the limit.
      r.fresh, r.rebuilt, r.base = true, true, math.max(0, floor)
    end
    gap, base, cd, cf, cn, co = r.gap, r.base, r.cd, r.cf, r.cn, r.co
  else
    whole, cd, cf, cn, co = s, s, 0, N, RING_HDR
    if not small and #s == RING_PREFIX then
      -- The string goes on past what was read: the slots read are enough when the gap and the
      -- cost's slots after it (and the report's first probe) are among them. Writes stay inside
      -- the string, so its size need not be known.
      gap = ringGapIn(s, RING_HDR + 1)
      if gap and gap + p.cost + 2 <= RING_PREFIX_SLOTS then
        whole, cn = false, RING_PREFIX_SLOTS
      elseif gap then
        -- The header's g0 is not kept up while the gap is among these slots (commit): the range
        -- is read from where the gap is.
        e, g0, gap, ls = e - (gap - g0) % N, gap, nil, 0
      end
    end
    if small or (whole and #s < RING_PREFIX) then
      -- Read whole: a small ring, or a large one still growing that ends within the first read.
      gap = ringGapIn(s, RING_HDR + 1)
      if #s < RING_HDR + 4 * N then size = #s end
    elseif not gap then
      -- The gap is at most GAP_DRIFT slots past g0: one range holds it, the c slots after it and
      -- the one after those (the report's first probe) and, when they are near, the hint's slots,
      -- with room for the gallop: the hint dates from the header's last write, and more slots
      -- have left the window since (READ_SPAN).
      ${READ_SPAN("p.cost")}
      -- A span past the ring's end is read to the end first; the part from slot 0 only when the
      -- gap is there (it has wrapped): most decisions near the end need one read, not two.
      local wraps = from + n > N
      local to = n
      if wraps then to = N - from end
      whole, cf, cn, co = false, from, to, 0
      if p.cost == 1 and ls > 0 then
        -- The header holds this range's offsets as text (ringHeader): no number to format (not
        -- when g0 was moved to the gap found in the first read: ls is 0 then).
        cd = redis.call('GETRANGE', key, string.sub(s, 34, 33 + ls), string.sub(s, 34 + ls, 33 + ls + le))
      else
        cd = redis.call('GETRANGE', key, RING_HDR + 4 * from, RING_HDR + 4 * (from + to) - 1)
      end
      -- A short read: the string ends there (a ring still growing), which its next write must know
      -- (commit: a SETRANGE past a string's end reserves up to twice its length).
      if #cd < 4 * to then size = RING_HDR + 4 * from + #cd end
      gap = ringGapIn(cd, 1)
      -- Also when the gap is near the end and the cost's slots after it (and the report's probe)
      -- go on from slot 0: else each of them would be read alone (one GETRANGE a slot, and a
      -- search of those read so far: a cost of 100 000 after one that filled the ring took
      -- minutes of Redis).
      if wraps and (not gap or gap + p.cost + 2 > to) then
        -- A ring still growing ends early: its missing slots are empty, and the part from slot 0
        -- must land where they end.
        if #cd < 4 * to then cd = cd .. string.rep('\\0', 4 * to - #cd) end
        if n - to <= RING_PREFIX_SLOTS then
          -- Among the slots of the first read.
          cd = cd .. string.sub(s, RING_HDR + 1, RING_HDR + 4 * (n - to))
        else
          cd = cd .. redis.call('GETRANGE', key, RING_HDR, RING_HDR + 4 * (n - to) - 1)
        end
        cn = n
        gap = ringGapIn(cd, 1)
      end
      if gap then
        gap = (from + gap) % N
      else
        -- Not where the header says (only a ring written by something else): read it whole.
        s = redis.call('GET', key)
        whole, cd, cf, cn, co = s, s, 0, N, RING_HDR
        gap = ringGapIn(s, RING_HDR + 1)
        size = nil
        if #s < RING_HDR + 4 * N then size = #s end
      end
    end
    if gap then
      -- The hint was counted from g0's oldest slot: the gap moved on since, over that many slots.
      e = e - (gap - g0) % N
    else
      -- No gap anywhere (only a ring written by something else): rebuilt from its live times.
      r = ${ringStateTable({ L: "L", g0: "g0", e: "e", base: "base", small: "small" })}
      local C = codec()
      C.ringBuild(r, C.ringTimes(whole, floor), now, p.window)
      gap, base, cd, cf, cn, co = r.gap, r.base, r.cd, r.cf, r.cn, r.co
    end
  end
  local c = p.cost
  -- The ring's state, built only when a later step needs it (commit, report, a slot not in what
  -- was read): a denial the read decides builds none — a table fewer to allocate and collect.
  if c > L then
    p.ring, p.allowed = r or ${STATE}, false
    return
  end
  -- Every slot it would overwrite must have left the window. Also kept for the report: the first
  -- one still inside (the slots before it are free: with times in order, exactly the remaining
  -- capacity), and when a denied cost would fit (the newest of them leaves).
  local first, latest, rel = c, 0, floor - base
  for j = 0, c - 1 do
    local v = 0 -- past the end of a ring still growing: never written
    local k = (gap + 1 + j - cf) % N
    if k < cn then
      -- ringSlot, inline, on what was read (its span holds these slots but past the ring's end)
      local a, b, x, d = string.byte(cd, co + 4 * k + 1, co + 4 * k + 4)
      if d then v = ((a * 256 + b) * 256 + x) * 256 + d end
    else
      r = r or ${STATE}
      v = ringSlot(r, key, j)
    end
    if v > 0 and v > rel and j < first then first = j end
    if v > latest then latest = v end
  end
  p.allowed, p.first = first == c, first
  if first < c then
    p.ring, p.reset = r or false, base + latest + p.window
    return
  end
  p.ring = r or ${STATE}
end
`);
