import { RING_READS_LUA } from "./ring-reads.lua";
import { compileRingState, ringStateTable } from "./ring-state";

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
 * Memory: 51 + 4 × limit bytes of value (the header, then L + 1 slots).
 */
export const SLIDING_LOG_RING_LUA = `${RING_READS_LUA}${compileRingState(`
ALG['sliding-log'] = {
  check = ringCheck,
  commit = function(p, now)
    local r, c = p.ring, p.cost
    local stamp = p.stamp
    if stamp < r.base + 1 then stamp = r.base + 1 end
    if stamp - r.base > RING_VALUE_MAX then
      -- A time past the base's 49 days: rebuild at a newer base (the live times are kept).
      codec().ringBuild(r, codec().ringTimes(r.whole or redis.call('GET', p.key), p.floor), now, p.window)
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
      bytes = string.rep(codec().p32(stamp - r.base), c) .. RING_GAP
    end
    r.gap = (g + c) % N
    -- The old slots that stay, [0, L - c) from the new oldest: how many have left the window.
    -- Read before writing, from what check fetched; the written slots are not among them.
    local hint = r.e - c
    p.f = ringFrontier(r, p.key, r.L - c, hint, p.floor)
    -- The TTL covers every slot (its time + window); renewed to two windows past this time only
    -- when that passes it: one PEXPIRE (and header write) per window, not one per admission.
    if r.hdr then
      -- The stored header's top and exp (the check decodes only what a decision needs).
      local t1, t2, t3, t4, t5, t6, x1, x2, x3, x4, x5, x6 = string.byte(r.hdr, 20, 31)
      r.top = ((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6
      r.exp = ((((x1 * 256 + x2) * 256 + x3) * 256 + x4) * 256 + x5) * 256 + x6
    end
    local renew = stamp + p.window > r.exp
    if renew then r.exp = stamp + 2 * p.window end
    if stamp > r.top then r.top = stamp end
    if r.rebuilt then
      -- A new, resized, rebased or converted ring: written whole (its gap at 0), a new one only as
      -- far as it is used.
      r.g0, r.e = r.gap, p.f
      local rest = ''
      if not r.fresh then rest = string.sub(r.whole, RING_HDR + 4 * (c + 1) + 1) end
      redis.call('SET', p.key, codec().ringHeader(r) .. bytes .. rest, 'PX', r.exp - now + GRACE)
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
        value = codec().ringHeader(r) .. string.sub(slots, 1, 4 * g) .. bytes
      else
        value = codec().ringHeader(r) .. string.sub(bytes, 4 * first + 1)
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
      redis.call('SETRANGE', p.key, 0, codec().ringHeader(r))
    end
    if renew then redis.call('PEXPIRE', p.key, r.exp - now + GRACE) end
  end,
  report = function(p, now, committed)
    local r = p.ring -- false on a denial that needed no ring state (the check)
    if r and r.lossless and r.rebuilt and not committed and p.stamp then
      -- A resized or converted ring that kept everything stored, the call did not commit (denied,
      -- here or by another policy): written as it is, so the change is paid once and the next
      -- call reads a ring of this limit. Its times are ones the key held: its TTL covers them
      -- (the header's exp is 0: the next admission renews it). Not by a peek (no stamp).
      redis.call('SET', p.key, r.whole, 'KEEPTTL')
      r.rebuilt = false
    end
    if p.cost > p.limit then
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
    return p.first, p.reset, p.reset - now
  end,
  refund = REFUNDS and function(p, now)
    local s = redis.pcall('GET', p.key)
    if type(s) == 'table' then
      -- The rule moved to the sorted set since: its members carry this request's id.
      local removed = 0
      for i = 1, p.cost do removed = removed + redis.call('ZREM', p.key, p.member .. '.' .. i) end
      return removed
    end
    if not codec().isRing(s) then return 0 end
    local L, _, _, base, top, exp = codec().ringFields(s)
    if not L then return 0 end
    local gap = ringGapIn(s, RING_HDR + 1)
    local target = p.at - base
    if not gap or target < 1 or target > RING_VALUE_MAX then return 0 end
    local N = L + 1
    -- Any cost slots holding exactly the request's time (equal times are interchangeable). A plain
    -- find runs in C; a hit must start on a slot boundary.
    local needle, slots = codec().p32(target), string.sub(s, RING_HDR + 1)
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
    local r = ${ringStateTable({ L: "L", g0: "0", e: "#hits", base: "base", top: "top", exp: "exp" })}
    redis.call('SET', p.key, codec().ringHeader(r) .. table.concat(parts), 'KEEPTTL')
    return #hits
  end,
}
`)}`;
