import { WL_FIND } from "./weighted-log-codec.lua";

/**
 * The weighted log's settle and refund (settle-driver.lua.ts, refund-driver.lua.ts), only in the
 * scripts that refund (every function a script defines is made again on each EVALSHA).
 *
 * Settle, fast path: the receipt names where the admission put its entry (the evaluate reply's
 * offset), and ONE BITFIELD reads the header's magic, start and end and the entry's member, and
 * writes the used units over the reservation's digits, `s` over the state and the difference
 * into the header's sum. It reads and writes at once, so what it wrote stands only when what it
 * read says the write was right: the log is v2, the entry is still live (a blind write would
 * settle an entry that left the window: its bytes stay until a compaction), it is this request's,
 * reserved (`r`) and holds the reservation. A prompt settle: EVALSHA + BITFIELD, 2 billed.
 *
 * Otherwise (billed counts: test/e2e/billed-commands.test.ts) a second BITFIELD writes back
 * every old value (a settle again: 3 billed, 409), and:
 * - the key was absent (magic 0: a reset, or the log expired): the BITFIELD made it, without a
 *   TTL: DEL instead of the write-back (3);
 * - the write went past the entries (the log shrank: a compaction, a reset and new entries): the
 *   string is cut back to them, GETRANGE + SET … KEEPTTL (5 before the slow path);
 * - the entry left the window, or was refunded: unknown (3);
 * - anything else (a compaction moved it, a v1 log): the slow path, as for a receipt without an
 *   offset: the member searched back from the newest entry (GETRANGE of the last 8 kB, one more
 *   for the header of a longer log), then patched in place: one BITFIELD (v2), one SETRANGE
 *   (v1). A compaction's move: 7 in all; no offset: 3.
 */
export const WL_SETTLE = `
if REFUNDS then
${WL_FIND}
local WLS = ALG['sliding-log-weighted']

-- Writes back what the fast path's BITFIELD overwrote: the units digits, the state, the sum.
local function wl_undo(p, u)
  local a = wl_ops({}, 'SET', u.ua, u.digits)
  a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = 'SET', 'u8', int((u.ua + 13) * 8), u.state
  -- 0 - delta: -delta of 0 prints '-0', which Redis refuses as an integer.
  a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = 'INCRBY', 'i64', 112, int(0 - u.delta)
  redis.call('BITFIELD', p.key, unpack(a))
end

-- The fast path at p.off (the entry's offset among the entries): 'done' (settled now, p.undo
-- holds what it overwrote), 'already' (settled before), 'gone' (nothing to settle), or nil: the
-- slow path decides. Whatever it returns but 'done', the log is as it was.
local function wl_fast(p)
  local m, off = p.member .. ',', p.off
  local ua = WL_HDR + off + #m + 15
  local delta = p.used - p.cost
  local a = wl_ops({ 'GET', 'u16', 0, 'GET', 'u32', 16, 'GET', 'u32', 48 }, 'GET', ua - 14 - #m, #m)
  wl_ops(a, 'SET', ua, string.format('%013.0f', p.used))
  a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = 'SET', 'u8', int((ua + 13) * 8), 115
  a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = 'INCRBY', 'i64', 112, int(delta)
  local r = redis.call('BITFIELD', p.key, unpack(a))
  local magic, start, last = r[1], r[2], r[3]
  local member, i = wl_got(r, 4, #m)
  local old, j = wl_got(r, i, 13)
  local u = { ua = ua, digits = old, state = r[j], delta = delta }
  local here = magic == WL_MAGIC_U16 and member == m and off + #m + 30 <= last
  if here and off >= start and u.state == 114 and old == string.format('%013.0f', p.cost) then
    -- The sum stays below 2^53 (exact in a double): a charge past WL_SUM_MAX is cut to what
    -- fits (as the slow path's), a BITFIELD more. A log that full denies every request anyway.
    local used = math.min(p.used, p.cost + math.max(0, WL_SUM_MAX - (r[j + 1] - delta)))
    if used < p.used then
      local b = wl_ops({}, 'SET', ua, string.format('%013.0f', used))
      b[#b + 1], b[#b + 2], b[#b + 3], b[#b + 4] = 'INCRBY', 'i64', 112, int(used - p.used)
      redis.call('BITFIELD', p.key, unpack(b))
      u.delta = used - p.cost
    end
    p.undo, p.charge = u, u.delta
    return 'done'
  end
  if magic == 0 then
    -- Absent (no log starts with a 0 byte): what the BITFIELD made has no TTL.
    redis.call('DEL', p.key)
    return 'gone'
  end
  wl_undo(p, u)
  if magic == WL_MAGIC_U16 then
    -- v2 has nothing after its entries: what the BITFIELD added past them goes.
    if ua + 14 > WL_HDR + last then
      redis.call('SET', p.key, redis.call('GETRANGE', p.key, 0, WL_HDR + last - 1), 'KEEPTTL')
    end
    if here and off < start then return 'gone' end
    if here and u.state == 115 then return 'already' end
    if here and u.state == 120 then return 'gone' end
    return nil
  end
  -- Another layout (v1 is text: no 0 byte in it): grown, it ends in zeros, cut at the first.
  local zero = string.char(0)
  if redis.call('GETRANGE', p.key, -1, -1) == zero then
    local s = redis.call('GETRANGE', p.key, 0, -1)
    redis.call('SET', p.key, string.sub(s, 1, string.find(s, zero, 1, true) - 1), 'KEEPTTL')
  end
  return nil
end

-- Exact: the request's entry keeps its place with 0 units (state x), its units off the sum. A
-- settled entry gives nothing back: the settle charged what the request used, final, as a
-- usage count's refund after its settle (refund-driver.lua.ts).
WLS.refund = function(p, now)
  local v = wl_open(p.key, true)
  local at, t, u, state, nxt = wl_find(v, p.member)
  if not at or state ~= 'r' then return 0 end
  wl_patch(v, at, nxt, p.member, t, 0, 'x', v.sum - u)
  return u
end
-- The request's live entry: found (p.already when settled before; p.done when the fast path
-- settled it already), or nil.
WLS.settleFind = function(p, now)
  -- An entry's units are 13 digits written in place: more would overwrite the entry's comma.
  p.used = math.min(p.used, WL_UNITS_MAX)
  if p.off then
    local fast = wl_fast(p)
    if fast == 'gone' then return nil end
    p.done, p.already = fast == 'done', fast == 'already'
    if fast then return true end
  end
  local v = wl_open(p.key, true)
  local at, t, u, state, nxt = wl_find(v, p.member)
  if not at or state == 'x' then return nil end
  p.v, p.e, p.already = v, { at = at, t = t, u = u, nxt = nxt }, state == 's'
  return true
end
-- The entry takes the units used and is marked settled; the log's sum moves by the difference
-- (more charged even past the limit, less given back). Returns the charge.
WLS.settleWrite = function(p, used)
  if p.done then return p.charge end
  local e = p.e
  used = math.min(used, WL_UNITS_MAX)
  -- The sum stays exact in a double (< 2^53): a charge past WL_SUM_MAX is cut to what fits. A
  -- log that full denies every request anyway (limits are at most 10^12), and what leaves the
  -- window later is what was written: the sum stays true.
  used = math.min(used, e.u + math.max(0, WL_SUM_MAX - p.v.sum))
  wl_patch(p.v, e.at, e.nxt, p.member, e.t, used, 's', p.v.sum + used - e.u)
  return used - e.u
end
-- The call is not settled after all (another policy's already, a gate taken): the fast path's
-- write goes.
WLS.settleUndo = function(p)
  if p.done then
    wl_undo(p, p.undo)
    p.done = false
  end
end
end
`;
