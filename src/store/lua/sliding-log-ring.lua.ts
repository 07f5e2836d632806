/**
 * The exact sliding-window log in a ring (the default `sliding-log`), as a fragment of the composed
 * scripts (see scripts.ts for the interface, ring-codec.lua.ts for the layout).
 *
 * Why it is exact: the ring holds the last L admission times (L = the limit). A request of cost c
 * fits iff at most L - c admissions are inside the window, iff the c oldest of the last L have left
 * it — the c slots at the head, the ones it would overwrite. Every one of them is checked (not only
 * the newest), so the decision stays exact-or-stricter when times are out of order (the caller's
 * clock, lease stamps); with the Redis clock times are in order and the decision is exact. A denial
 * writes nothing. Several isolates share the ring through the one atomic script, as with the
 * sorted set.
 *
 * remaining = the slots that have left the window: found from the stored hint with a galloping
 * then binary search (two slot reads when the hint is right). With times in order it is exact;
 * out of order it can be off by the units stamped out of order, while they are (decisions are not).
 *
 * Redis commands: a ring of at most RING_WHOLE_MAX bytes (limit ≤ 240): GET, then one SETRANGE of
 * the c times and the gap on an admission (with TIME: 3 per admission, 2 per denial). Larger:
 * GETRANGE of the header and GETRANGE of a short range from where the header saw the gap (it
 * holds the gap, the slots to overwrite and the hint's), then the same one SETRANGE. The header is
 * rewritten (SETRANGE) once the gap moved GAP_DRIFT slots, and with PEXPIRE once per window (the
 * TTL is set to two windows past the newest time, so that most admissions need not renew it).
 * Refund: GET and SET … KEEPTTL of the whole ring (the refunded slots move next to the gap, oldest
 * end, so the capacity is back at once, not when they would have reached it).
 * Memory: 35 + 4 × limit bytes of value.
 */
export const SLIDING_LOG_RING_LUA = `
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
  local r = { L = L, gap = 0, g0 = 0, e = L, base = 0, top = 0, exp = 0, cf = 0, cn = 0, cd = '',
    small = RING_HDR + 4 * (L + 1) <= RING_WHOLE_MAX, whole = false, rebuilt = false,
    fresh = false }
  p.ring, p.floor = r, now - p.window
  local s
  if r.small then
    s = redis.pcall('GET', p.key)
  else
    s = redis.pcall('GETRANGE', p.key, 0, RING_HDR - 1)
  end
  if type(s) == 'table' then return ringBuild(r, zsetTimes(p.key, now, p.window), now, p.window) end
  local stored
  if isRing(s) then stored, r.g0, r.e, r.base, r.top, r.exp = ringFields(s) end
  if not stored then
    -- No ring yet: every slot is empty. It is written as long as it is used (the header, the
    -- times, the gap) and grows with later writes: a client that sends a few requests under a
    -- large limit costs bytes for those few, not for the limit.
    r.fresh, r.rebuilt, r.base = true, true, math.max(0, now - p.window)
    return
  end
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
    ringRead(r, p.key, r.g0, n)
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

ALG['sliding-log'] = {
  check = function(p, now)
    ringOpen(p, now)
    local r, c = p.ring, p.cost
    if c > r.L then
      p.allowed = false
      return
    end
    -- Every slot it would overwrite must have left the window. Also kept for the report: the
    -- first one still inside (the slots before it are free: with times in order, exactly the
    -- remaining capacity) and the newest of them (when this cost fits).
    local first, latest, floor = c, 0, p.floor - r.base
    for j = 0, c - 1 do
      local v = ringSlot(r, p.key, j)
      if v > 0 and v > floor and j < first then first = j end
      if v > latest then latest = v end
    end
    p.allowed, p.first, p.latest = first == c, first, latest
  end,
  commit = function(p, now)
    local r, c = p.ring, p.cost
    local stamp = p.stamp
    if stamp < r.base + 1 then stamp = r.base + 1 end
    if stamp - r.base > RING_VALUE_MAX then
      -- A time past the base's 49 days: rebuild at a newer base (the live times are kept).
      ringBuild(r, ringTimes(r.whole or redis.call('GET', p.key), p.floor), now, p.window)
      stamp = p.stamp
      if stamp < r.base + 1 then stamp = r.base + 1 end
    end
    p.stamped = stamp
    local N = r.L + 1
    local g = r.gap
    -- The c oldest slots (after the gap) take the time, and the gap moves past them: c + 1
    -- contiguous slots from the old gap.
    local bytes
    if c == 1 then
      -- One string for the time and the gap (one allocation, not two).
      local v = stamp - r.base
      local d = v % 256
      v = (v - d) / 256
      local cc = v % 256
      v = (v - cc) / 256
      local b = v % 256
      bytes = string.char((v - b) / 256, b, cc, d, 255, 255, 255, 255)
    else
      bytes = string.rep(p32(stamp - r.base), c) .. RING_GAP
    end
    r.gap = (g + c) % N
    -- The old slots that stay, [0, L - c) from the new oldest: how many have left the window.
    -- Read before writing, from what check fetched; the written slots are not among them.
    local hint = r.e - c
    p.f = ringFrontier(r, p.key, r.L - c, hint, p.floor)
    -- The TTL covers every slot (its time + window); renewed to two windows past this time only
    -- when that passes it: one PEXPIRE (and header write) per window, not one per admission.
    local renew = stamp + p.window > r.exp
    if renew then r.exp = stamp + 2 * p.window end
    if stamp > r.top then r.top = stamp end
    if r.rebuilt then
      -- A new, resized, rebased or converted ring: written whole (its gap at 0), a new one only as
      -- far as it is used.
      r.g0, r.e = r.gap, p.f
      local rest = ''
      if not r.fresh then rest = string.sub(r.whole, RING_HDR + 4 * (c + 1) + 1) end
      redis.call('SET', p.key, ringHeader(r) .. bytes .. rest, 'PX', r.exp - now + GRACE)
      return
    end
    local first = N - g
    if first >= c + 1 then
      first = c + 1
      if g + c + 1 < N then
        redis.call('SETRANGE', p.key, RING_HDR + 4 * g, bytes)
        first = nil
      end
    end
    if first then
      -- The write reaches the ring's end (once a lap): the ring is rewritten whole, at its exact
      -- size — a string grown by SETRANGE keeps up to twice its length allocated.
      local slots = string.sub(r.whole or redis.call('GET', p.key), RING_HDR + 1)
      if #slots < 4 * N then slots = slots .. string.rep('\\0', 4 * N - #slots) end
      if not renew then
        renew = true
        r.exp = stamp + 2 * p.window
      end
      r.g0, r.e = r.gap, p.f
      local value
      if first == c + 1 then
        value = ringHeader(r) .. string.sub(slots, 1, 4 * g) .. bytes
      else
        value = ringHeader(r) .. string.sub(bytes, 4 * first + 1)
          .. string.sub(slots, 4 * (c + 1 - first) + 1, 4 * g) .. string.sub(bytes, 1, 4 * first)
      end
      redis.call('SET', p.key, value, 'PX', r.exp - now + GRACE)
      return
    end
    -- The header follows the gap when it drifted far (large rings read GAP_DRIFT slots from g0),
    -- when its hint was far off (time moved on: the search left the range read, and would again
    -- on every call until the header learns), or with the TTL.
    local drift = p.f - hint
    if drift < 0 then drift = -drift end
    if renew or (not r.small and ((r.gap - r.g0) % N >= GAP_DRIFT or drift > 8)) then
      r.g0, r.e = r.gap, p.f
      redis.call('SETRANGE', p.key, 0, ringHeader(r))
    end
    if renew then redis.call('PEXPIRE', p.key, r.exp - now + GRACE) end
  end,
  report = function(p, now, committed)
    local r = p.ring
    if p.cost > r.L then
      return ringFrontier(r, p.key, r.L, r.e, p.floor), now + p.window, p.window
    end
    if committed then
      -- The oldest admission still inside the window leaves first: an old one, or this one.
      if p.f >= r.L - p.cost then return p.f, p.stamped + p.window, 0 end
      return p.f, r.base + ringSlot(r, p.key, p.f) + p.window, 0
    end
    if p.allowed then
      -- It would fit, but another policy denied the request: nothing was written.
      local f = ringFrontier(r, p.key, r.L, r.e, p.floor)
      if f == r.L then return f, now, 0 end
      return f, r.base + ringSlot(r, p.key, f) + p.window, 0
    end
    -- Denied: the cost fits when the newest of the c slots it would overwrite leaves. Only time
    -- frees capacity in a log (others can only consume), so this instant is exact. The free
    -- slots are the ones before the first still inside (check): no search needed.
    local reset = r.base + p.latest + p.window
    return p.first, reset, reset - now
  end,
  refund = function(p, now)
    local s = redis.pcall('GET', p.key)
    if type(s) == 'table' then
      -- The rule moved to the sorted set since: its members carry this request's id.
      local removed = 0
      for i = 1, p.cost do removed = removed + redis.call('ZREM', p.key, p.member .. '.' .. i) end
      return removed
    end
    if not isRing(s) then return 0 end
    local L, _, _, base, top, exp = ringFields(s)
    if not L then return 0 end
    local gap = ringGapIn(s, RING_HDR + 1)
    local target = p.at - base
    if not gap or target < 1 or target > RING_VALUE_MAX then return 0 end
    local N = L + 1
    -- Any cost slots holding exactly the request's time (equal times are interchangeable). A plain
    -- find runs in C; a hit must start on a slot boundary.
    local needle, slots = p32(target), string.sub(s, RING_HDR + 1)
    -- A ring still growing ends before its last slots: they are empty.
    if #slots < 4 * N then slots = slots .. string.rep('\\0', 4 * N - #slots) end
    local hits, from = {}, 1
    while #hits < p.cost do
      local at = string.find(slots, needle, from, true)
      if not at then break end
      if (at - 1) % 4 == 0 then
        hits[#hits + 1] = ((at - 1) / 4 - gap - 1) % N
        from = at + 4
      else
        from = at + 1
      end
    end
    if #hits == 0 then return 0 end
    table.sort(hits)
    -- The ring from its oldest slot, the refunded slots cut out and as many empty slots put at
    -- the oldest end (the next admission takes them), the gap first.
    local ordered = string.sub(slots, 4 * (gap + 1) + 1) .. string.sub(slots, 1, 4 * gap)
    local parts, prev = { RING_GAP, string.rep('\\0\\0\\0\\0', #hits) }, 0
    for _, j in ipairs(hits) do
      parts[#parts + 1] = string.sub(ordered, 4 * prev + 1, 4 * j)
      prev = j + 1
    end
    parts[#parts + 1] = string.sub(ordered, 4 * prev + 1)
    local r = { L = L, g0 = 0, e = #hits, base = base, top = top, exp = exp }
    redis.call('SET', p.key, ringHeader(r) .. table.concat(parts), 'KEEPTTL')
    return #hits
  end,
}
`;
