import { RING_READS_LUA } from "./ring-reads.lua";
import { RING_REFUND_LUA } from "./ring-refund.lua";
import { RING_SLOTS_LUA } from "./ring-slots.lua";
import { compileRingState } from "./ring-state";

/**
 * The exact sliding-window log in a ring (the default `sliding-log`), as a fragment of the composed
 * scripts (see scripts.ts for the interface, ring-codec.lua.ts for the layout).
 *
 * Why it is exact: the ring holds the last L admission times (L = the limit; a ring kept at a
 * larger capacity decides on its newest L slots: ring-reads.lua.ts). A request of cost c
 * fits iff at most L - c admissions are inside the window, iff the c oldest of the last L have left
 * it — the c slots at the head, the ones it would overwrite. Every one of them is checked (not only
 * the newest), so the decision stays exact-or-stricter when times are out of order (the caller's
 * clock, lease stamps); with the Redis clock times are in order and the decision is exact. A denial
 * writes nothing. Several isolates share the ring through the one atomic script.
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
 * Refund: ring-refund.lua.ts.
 * Memory: 51 + 4 × limit bytes of value (the header, then L + 1 slots) when full, less while it
 * grows: a new ring is written as far as it is used and grows by SETRANGE, which makes Redis
 * reserve up to twice the new length; once that would pass the full ring's size the ring is
 * written whole at its full size (GET and SET, once), so whatever sequence wrote it, its MEMORY
 * USAGE stays within the full ring's (458 800 B at limit 100 000).
 */
export const SLIDING_LOG_RING_LUA = `${RING_SLOTS_LUA}${RING_READS_LUA}${RING_REFUND_LUA}${compileRingState(`
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
    -- The old slots that stay, [0, L - c) from the new oldest the limit counts: how many have
    -- left the window. Read before writing, from what check fetched; the written slots are not
    -- among them (they are the oldest of the whole ring, o + c slots before these).
    local hint = r.e - r.o - c
    p.f = ringFrontier(r, p.key, p.limit - c, hint, p.floor)
    -- The header's hint counts from the ring's oldest slot, o before the limit's: with times in
    -- order those have left the window when one of the limit's slots has; when none has, what
    -- the hint said before (they may be inside it: a larger limit's admissions).
    local eAbs = p.f + r.o
    if p.f == 0 and r.o > 0 then eAbs = math.min(r.o, math.max(0, r.e - c)) end
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
    -- Only when few can be live: the frontier (p.f, exact with times in order) says how many of
    -- the old slots left the window, so a busy ring is never scanned for it; and a lap only up to
    -- RING_COMPACT_LAP_MAX slots (the scan is O(limit), beside the lap's own rewrite).
    if not r.small and not r.fresh and c + 1 <= RING_COMPACT_MAX and p.limit - p.f + 1 <= RING_COMPACT_MAX
        and (r.rebuilt or (g + c + 1 >= N and N <= RING_COMPACT_LAP_MAX)
          or (r.whole and RING_HDR + 4 * (g + c + 1) > RING_PREFIX)) then
      -- A large ring rebuilt (resized, converted), whose write would take it past its first read
      -- (the whole string was read: it is still growing), or reaching its end (a lap): when few
      -- of its units are live (a key far under its limit), it is written compact instead, so the
      -- next decisions again find everything in one read. Dropped slots had left the window (as
      -- a rebuild drops them).
      local C = codec()
      r.whole = r.whole or redis.call('GET', p.key)
      local times = C.ringTimes(r.whole, p.floor, RING_COMPACT_MAX - c - 1)
      if times then
        for _ = 1, c do times[#times + 1] = stamp end
        table.sort(times)
        if not renew then r.exp = stamp + 2 * p.window end
        local value = C.ringCompact(r, times)
        redis.call('SET', p.key, value, 'PX', r.exp - now + GRACE)
        -- What the report reads: the compact ring, whole; every slot before its times is free.
        p.f = math.max(0, p.limit - #times)
        r.cd, r.cf, r.cn, r.co, r.chunks, r.whole = value, 0, N, RING_HDR, nil, value
        return
      end
    end
    if r.rebuilt and g + c + 1 <= N then
      -- A new, resized, rebased or converted ring: written whole, a new one only as far as it is
      -- used (its gap at 0; a grown or shrunk one's is after its slots).
      r.g0, r.e = r.gap, eAbs
      local head, rest = '', ''
      if not r.fresh then
        head = string.sub(r.whole, RING_HDR + 1, RING_HDR + 4 * g)
        rest = string.sub(r.whole, RING_HDR + 4 * (g + c + 1) + 1)
      end
      redis.call('SET', p.key, codec().ringHeader(r) .. head .. bytes .. rest, 'PX', r.exp - now + GRACE)
      return
    end
    local first = N - g
    if first >= c + 1 then
      first = c + 1
      -- A SETRANGE past a string's end makes Redis reserve up to twice the new length (sds's
      -- greedy growth; +1 MB past 1 MB): fine while that stays within the full ring's size, which
      -- keeps small appends O(cost) (Redis grows the string geometrically); past it the ring is
      -- written whole at its full size, once (a 2-unit ring grown by 98 300 in one call kept
      -- 917 kB where the full ring takes 459 kB).
      local stop = RING_HDR + 4 * (g + c + 1)
      if g + c + 1 < N and not (r.size and stop > r.size
          and stop + math.min(stop, 1048576) > RING_HDR + 4 * N) then
        redis.call('SETRANGE', p.key, RING_HDR + 4 * g, bytes)
        first = nil
      end
    end
    if first then
      -- The write reaches the ring's end (once a lap), or grows it past half its size: the ring is
      -- rewritten whole, at its exact size — a string grown by SETRANGE keeps up to twice its
      -- length allocated.
      local slots = string.sub(r.whole or redis.call('GET', p.key), RING_HDR + 1)
      if #slots < 4 * N then slots = slots .. string.rep('\\0', 4 * N - #slots) end
      if not renew then
        renew = true
        r.exp = stamp + 2 * p.window
      end
      r.g0, r.e = r.gap, eAbs
      local value
      if first == c + 1 then
        value = codec().ringHeader(r) .. string.sub(slots, 1, 4 * g) .. bytes
          .. string.sub(slots, 4 * (g + c + 1) + 1)
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
    -- A gap among the slots of the first read is found there (ringCheck): g0 need not follow it,
    -- and a ring read whole needs no hint. Most keys far under a large limit write no header.
    if renew or (not r.small and ((r.gap >= RING_PREFIX_SLOTS and (r.gap - r.g0) % N >= GAP_DRIFT)
        or (not r.whole and drift > 8))) then
      r.g0, r.e = r.gap, eAbs
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
      return ringFrontier(r, p.key, p.limit, r.e - r.o, p.floor), now + p.window, p.window
    end
    if committed then
      -- The oldest admission still inside the window leaves first: an old one, or this one.
      if p.f >= p.limit - p.cost then return p.f, p.stamped + p.window, 0 end
      return p.f, r.base + ringSlot(r, p.key, p.f) + p.window, 0
    end
    if p.allowed then
      -- It would fit, but another policy denied the request: nothing was written.
      local f = ringFrontier(r, p.key, p.limit, r.e - r.o, p.floor)
      if f == p.limit then return f, now, 0 end
      return f, r.base + ringSlot(r, p.key, f) + p.window, 0
    end
    -- Denied: the cost fits when the newest of the c slots it would overwrite leaves. Only time
    -- frees capacity in a log (others can only consume), so this instant is exact. The free
    -- slots are the ones before the first still inside (check): no search needed.
    return p.first, p.reset, p.reset - now
  end,
  refund = ringRefund,
}
`)}`;
