import { compileRingState, ringStateTable } from "./ring-state";

/**
 * Reading a ring (ring-codec.lua.ts has the layout) for a decision or a peek, never writing: where
 * its gap is, its slots from the oldest, and how many of them have left the window. Large rings
 * are read by range (GETRANGE) and keep what they read. Part of the ring's fragment
 * (sliding-log-ring.lua.ts), which writes.
 */
export const RING_READS_LUA = compileRingState(`
-- Logical slot j (0 = the oldest) is physical slot (gap + 1 + j) mod (L + 1). A large ring keeps
-- what it read: one range (r.cf, r.cn, r.cd: first physical slot, count, bytes), others in
-- r.chunks.
local function ringSlot(r, key, j)
  if r.fresh then return 0 end
  local i = (r.gap + 1 + j) % (r.L + 1)
  if r.whole then return u32(r.whole, RING_HDR + 4 * i + 1) end
  local k = (i - r.cf) % (r.L + 1)
  if k < r.cn then return u32(r.cd, 4 * k + 1) end
  if r.chunks then
    for _, c in ipairs(r.chunks) do
      if i >= c.from and i < c.from + c.n then return u32(c.data, 4 * (i - c.from) + 1) end
    end
  end
  local data = redis.call('GETRANGE', key, RING_HDR + 4 * i, RING_HDR + 4 * i + 3)
  r.chunks = r.chunks or {}
  r.chunks[#r.chunks + 1] = { from = i, n = 1, data = data }
  return u32(data, 1)
end

-- Reads n physical slots from i0 (wrapping) into r.cf/r.cn/r.cd: one GETRANGE, two if they wrap.
local function ringRead(r, key, i0, n)
  local N = r.L + 1
  if n > N then n = N end
  local first = n
  if i0 + n > N then first = N - i0 end
  local data = redis.call('GETRANGE', key, RING_HDR + 4 * i0, RING_HDR + 4 * (i0 + first) - 1)
  if first < n then
    -- A ring still growing ends early: its missing slots are empty, and the wrapped part must
    -- land where they end.
    if #data < 4 * first then data = data .. string.rep('\\0', 4 * first - #data) end
    data = data .. redis.call('GETRANGE', key, RING_HDR, RING_HDR + 4 * (n - first) - 1)
  end
  r.cf, r.cn, r.cd = i0, n, data
end

local function ringExpired(r, key, j, floor)
  local v = ringSlot(r, key, j)
  return v == 0 or r.base + v <= floor
end

-- The number of slots from the oldest, among the first n, that have left the window (the first
-- one still inside it), from a hint: gallop from the hint, then binary search.
local function ringFrontier(r, key, n, hint, floor)
  if hint > n then hint = n end
  if hint < 0 then hint = 0 end
  local lo, hi = 0, n
  if hint > 0 and not ringExpired(r, key, hint - 1, floor) then
    hi = hint - 1
  else
    lo = hint
    local step = 1
    while lo < hi do
      local probe = lo + step - 1
      if probe > hi - 1 then probe = hi - 1 end
      if ringExpired(r, key, probe, floor) then
        lo, step = probe + 1, step * 2
      else
        hi = probe
        break
      end
    end
  end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if ringExpired(r, key, mid, floor) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- Loads the ring for a decision or a peek; never writes. A missing key, another layout (the
-- sorted set, after the rule's algorithm changed: its live times are carried over) or another
-- limit (rebuilt at the new size from its live times) become r.whole, written on commit.
-- Allocation is what a script pays most for in Redis's Lua (its garbage collector): one table of
-- 13 fields (one hash of 16, never grown), measured cheaper than growing the policy's own table.
local function ringOpen(p, now)
  local L = p.limit
  local r = ${ringStateTable({ L: "L", gap: "0", g0: "0", e: "L", base: "0", top: "0", exp: "0", cf: "0", cn: "0", cd: "''", small: "RING_HDR + 4 * (L + 1) <= RING_WHOLE_MAX" })}
  p.ring, p.floor = r, now - p.window
  local s
  if r.small then
    s = redis.pcall('GET', p.key)
  else
    -- The header's bounds as literals: a number argument is formatted into a new string per call.
    s = redis.pcall('GETRANGE', p.key, '0', RING_HDR_LAST)
  end
  if type(s) == 'table' then return ringBuild(r, zsetTimes(p.key, now, p.window), now, p.window) end
  -- A missing key reads as false (GET) or '' (GETRANGE); ringFields refuses '' and non-rings.
  local stored, g0, e, base, top, exp
  if s then stored, g0, e, base, top, exp = ringFields(s) end
  if not stored then
    -- No ring yet: every slot is empty. It is written as long as it is used (the header, the
    -- times, the gap) and grows with later writes: a client that sends a few requests under a
    -- large limit costs bytes for those few, not for the limit.
    r.fresh, r.rebuilt, r.base = true, true, math.max(0, now - p.window)
    return
  end
  r.g0, r.e, r.base, r.top, r.exp = g0, e, base, top, exp
  if stored ~= L then
    if not r.small then s = redis.call('GET', p.key) end
    return ringBuild(r, ringTimes(s, p.floor), now, p.window)
  end
  local gap
  if r.small then
    r.whole = s
    gap = ringGapIn(s, RING_HDR + 1)
  else
    -- The gap is at most GAP_DRIFT slots past g0: one range holds it, the c slots after it, the
    -- one after those (the report's first probe) and, when they are near, the slots around the
    -- hint, with room for the gallop: the hint dates from the header's last write, and more
    -- slots have left the window since.
    local n = GAP_DRIFT + p.cost + 2
    if r.e + 16 <= 256 and r.e + 16 > n then n = r.e + 16 end
    local i0 = r.g0
    if i0 + n <= L + 1 then
      -- One range, no wrap (ringRead's common case, inline: this runs on every decision).
      r.cf, r.cn = i0, n
      r.cd = redis.call('GETRANGE', p.key, RING_HDR + 4 * i0, RING_HDR + 4 * (i0 + n) - 1)
    else
      ringRead(r, p.key, i0, n)
    end
    gap = ringGapIn(r.cd, 1)
    if gap then
      gap = (r.g0 + gap) % (L + 1)
    else
      -- Not where the header says (only a ring written by something else): read it whole.
      s = redis.call('GET', p.key)
      r.whole = s
      gap = ringGapIn(s, RING_HDR + 1)
    end
  end
  if not gap then return ringBuild(r, ringTimes(r.whole, p.floor), now, p.window) end
  r.gap = gap
  -- The hint was counted from g0's oldest slot: the gap moved on since, over that many slots.
  r.e = r.e - (gap - r.g0) % (L + 1)
  if not r.whole and r.e > 0 and r.e < L then
    -- The hint far from the gap (a ring mostly free, or mostly in use): the search's first
    -- probes (the hint's two slots and the gallop's next few) in one more range.
    local i = (gap + r.e) % (L + 1)
    if (i - r.cf) % (L + 1) + 10 > r.cn then
      local n = 10
      if i + n > L + 1 then n = L + 1 - i end
      r.chunks = { { from = i, n = n,
        data = redis.call('GETRANGE', p.key, RING_HDR + 4 * i, RING_HDR + 4 * (i + n) - 1) } }
    end
  end
end
`);
