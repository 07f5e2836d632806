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
 * Redis commands: a ring of at most RING_WHOLE_MAX bytes (limit ≤ 248): GET, then SET … PX on an
 * admission (with TIME: 3 per admission, 2 per denial). Larger: GETRANGE of the header, GETRANGE of
 * the slots to overwrite and the hint (one range when they are close, else two), SETRANGE of the
 * slots (two when they wrap) and of the header, and PEXPIRE once per window (the TTL is set to two
 * windows past the newest time, so that most admissions need not renew it).
 * Refund: GET and SET … KEEPTTL of the whole ring (the refunded slots move to the head, so the
 * capacity is back at once, not when they would have reached it).
 * Memory: 31 + 4 × limit bytes of value.
 */
export const SLIDING_LOG_RING_LUA = `
-- A large ring keeps what it read in r: one range in r.cf/r.cn/r.cd (from, count, data: what
-- check prefetches, enough for most decisions), any others in r.chunks.
local function ringSlot(r, key, j)
  local i = (r.head + j) % r.L
  if r.whole then return u32(r.whole, RING_HDR + 4 * i + 1) end
  local from = r.cf
  if i >= from and i < from + r.cn then return u32(r.cd, 4 * (i - from) + 1) end
  for _, c in ipairs(r.chunks) do
    if i >= c.from and i < c.from + c.n then return u32(c.data, 4 * (i - c.from) + 1) end
  end
  local data = redis.call('GETRANGE', key, RING_HDR + 4 * i, RING_HDR + 4 * i + 3)
  r.chunks[#r.chunks + 1] = { from = i, n = 1, data = data }
  return u32(data, 1)
end

-- Reads slots [j0, j1) from the head (a large ring; one GETRANGE, two if they wrap).
local function ringPrefetch(r, key, j0, j1)
  if r.whole or j1 <= j0 then return end
  local i0 = (r.head + j0) % r.L
  local n = j1 - j0
  local first = math.min(n, r.L - i0)
  local data = redis.call('GETRANGE', key, RING_HDR + 4 * i0, RING_HDR + 4 * (i0 + first) - 1)
  if r.cn == 0 then
    r.cf, r.cn, r.cd = i0, first, data
  else
    r.chunks[#r.chunks + 1] = { from = i0, n = first, data = data }
  end
  if first < n then
    r.chunks[#r.chunks + 1] = { from = 0, n = n - first,
      data = redis.call('GETRANGE', key, RING_HDR, RING_HDR + 4 * (n - first) - 1) }
  end
end

local function ringExpired(r, key, j, floor)
  local v = ringSlot(r, key, j)
  return v == 0 or r.base + v <= floor
end

-- The number of slots from the head, among the first n, that have left the window (the first one
-- still inside it), from a hint: gallop from the hint, then binary search.
local function ringFrontier(r, key, n, hint, floor)
  if hint > n then hint = n end
  local lo, hi = 0, n
  if hint > 0 and not ringExpired(r, key, hint - 1, floor) then
    hi = hint - 1
  else
    lo = hint
    local step = 1
    while lo < hi do
      local probe = math.min(lo + step - 1, hi - 1)
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
local function ringOpen(p, now)
  local L = p.limit
  local r = { L = L, head = 0, e = L, base = 0, top = 0, exp = 0, cf = 0, cn = 0, cd = '' }
  p.ring, p.floor = r, now - p.window
  r.small = RING_HDR + 4 * L <= RING_WHOLE_MAX
  local s
  if r.small then
    s = redis.pcall('GET', p.key)
  else
    s = redis.pcall('GETRANGE', p.key, 0, RING_HDR - 1)
  end
  if type(s) == 'table' then return ringBuild(r, zsetTimes(p.key, now, p.window), now, p.window) end
  local stored
  if isRing(s) then stored, r.head, r.e, r.base, r.top, r.exp = ringFields(s) end
  if not stored then return ringBuild(r, {}, now, p.window) end
  if stored ~= L then
    if not r.small then s = redis.call('GET', p.key) end
    return ringBuild(r, ringTimes(s, p.floor), now, p.window)
  end
  if r.small then r.whole = s else r.chunks = {} end
end

ALG['sliding-log'] = {
  check = function(p, now)
    ringOpen(p, now)
    local r, c = p.ring, p.cost
    if c > r.L then
      p.allowed = false
      return
    end
    -- One range for the slots to overwrite, the slot after them and the hint's two slots (what
    -- the report reads) when they are close; two ranges when they are not.
    local e = math.min(r.e, r.L)
    if e + 2 <= math.max(c + 1, 256) then
      ringPrefetch(r, p.key, 0, math.min(r.L, math.max(c + 1, e + 2)))
    else
      ringPrefetch(r, p.key, 0, math.min(r.L, c + 1))
      ringPrefetch(r, p.key, e - 1, math.min(r.L, e + 1))
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
    local stamp = math.max(p.stamp, r.base + 1)
    if stamp - r.base > RING_VALUE_MAX then
      -- A time past the base's 49 days: rebuild at a newer base (the live times are kept).
      ringBuild(r, ringTimes(r.whole or redis.call('GET', p.key), p.floor), now, p.window)
      stamp = math.max(p.stamp, r.base + 1)
    end
    p.stamped = stamp
    local i0 = r.head
    local bytes = string.rep(p32(stamp - r.base), c)
    local first = math.min(c, r.L - i0)
    r.head = (i0 + c) % r.L
    if stamp > r.top then r.top = stamp end
    -- The old slots that stay, [0, L - c) from the new head: how many have left the window. Read
    -- before writing, from what check fetched; the written slots are not among them.
    p.f = ringFrontier(r, p.key, r.L - c, math.max(math.min(r.e, r.L) - c, 0), p.floor)
    r.e = p.f
    -- The TTL covers every slot (top + window) and is renewed to two windows past top only when
    -- that passes it: one PEXPIRE per window, not one per admission.
    local renew = r.top + p.window > r.exp
    if renew then r.exp = r.top + 2 * p.window end
    if r.rebuilt then
      -- A new, resized, rebased or converted ring: written whole.
      local w = r.whole
      local at = RING_HDR + 4 * i0
      redis.call('SET', p.key, ringHeader(r) .. string.sub(w, RING_HDR + 1, at) .. bytes
        .. string.sub(w, at + 4 * c + 1), 'PX', r.exp - now + GRACE)
      return
    end
    if r.small then
      -- One SETRANGE from the start: the header and the slots up to the last one written (one
      -- concatenation; r.whole stays the old string, the report reads only slots not written).
      local w, at = r.whole, RING_HDR + 4 * i0
      local value
      if first == c then
        value = ringHeader(r) .. string.sub(w, RING_HDR + 1, at) .. bytes
      else
        value = ringHeader(r) .. string.sub(bytes, 4 * first + 1)
          .. string.sub(w, RING_HDR + 4 * (c - first) + 1, at) .. string.sub(bytes, 1, 4 * first)
      end
      redis.call('SETRANGE', p.key, 0, value)
    else
      redis.call('SETRANGE', p.key, RING_HDR + 4 * i0, string.sub(bytes, 1, 4 * first))
      if first < c then redis.call('SETRANGE', p.key, RING_HDR, string.sub(bytes, 4 * first + 1)) end
      redis.call('SETRANGE', p.key, 0, ringHeader(r))
    end
    if renew then redis.call('PEXPIRE', p.key, r.exp - now + GRACE) end
  end,
  report = function(p, now, committed)
    local r = p.ring
    if p.cost > r.L then
      return ringFrontier(r, p.key, r.L, math.min(r.e, r.L), p.floor), now + p.window, p.window
    end
    if committed then
      -- The oldest admission still inside the window leaves first: an old one, or this one.
      if p.f >= r.L - p.cost then return p.f, p.stamped + p.window, 0 end
      return p.f, r.base + ringSlot(r, p.key, p.f) + p.window, 0
    end
    if p.allowed then
      -- It would fit, but another policy denied the request: nothing was written.
      local f = ringFrontier(r, p.key, r.L, math.min(r.e, r.L), p.floor)
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
    local L, head, _, base, top, exp = ringFields(s)
    if not L then return 0 end
    local target = p.at - base
    if target < 1 or target > RING_VALUE_MAX then return 0 end
    -- Any cost slots holding exactly the request's time (equal times are interchangeable). A plain
    -- find runs in C; a hit must start on a slot boundary.
    local needle, slots = p32(target), string.sub(s, RING_HDR + 1)
    local hits, from = {}, 1
    while #hits < p.cost do
      local at = string.find(slots, needle, from, true)
      if not at then break end
      if (at - 1) % 4 == 0 then
        hits[#hits + 1] = ((at - 1) / 4 - head) % L
        from = at + 4
      else
        from = at + 1
      end
    end
    if #hits == 0 then return 0 end
    table.sort(hits)
    -- The ring from the head, the refunded slots cut out and as many empty slots put at the head:
    -- the next admission takes them.
    local ordered = string.sub(slots, 4 * head + 1) .. string.sub(slots, 1, 4 * head)
    local parts, prev = { string.rep('\\0\\0\\0\\0', #hits) }, 0
    for _, j in ipairs(hits) do
      parts[#parts + 1] = string.sub(ordered, 4 * prev + 1, 4 * j)
      prev = j + 1
    end
    parts[#parts + 1] = string.sub(ordered, 4 * prev + 1)
    local r = { L = L, head = 0, e = #hits, base = base, top = top, exp = exp }
    redis.call('SET', p.key, ringHeader(r) .. table.concat(parts), 'KEEPTTL')
    return #hits
  end,
}
`;
