import { WL_CODEC } from "./weighted-log-codec.lua";
import { WL_SETTLE } from "./weighted-settle.lua";

/**
 * The weighted sliding log (`sliding-log-weighted`), as a fragment of the composed scripts (see
 * scripts.ts for the interface): each admission is one entry with its units, so memory grows with
 * the requests in the window, not with the units (a usage rule's limit may be 10^12 tokens; the
 * ring's 4 bytes a unit could not hold that).
 *
 * Layout (weighted-log-codec.lua.ts): a fixed binary header, then the entries, oldest first. An
 * entry is `<member>,<time>,<units>,<state>;`: the admission's member id, its time and the units
 * it holds now (13 digits each: its reservation, then what settle made of it), and `r` reserved,
 * `s` settled, `x` refunded (0 units). The header holds where the first live entry starts (the
 * ones before it have left the window and wait for the next compaction), where the entries end,
 * the live count, the units of every live entry (`sum`) and when the key's TTL runs out. So an
 * admission reads the first 8 kB (the header and the oldest entries, whatever the log's length),
 * parsing only the entries that leave (and, for a denial's wait, the oldest live ones, read on in
 * 8 kB ranges when it needs more), and writes the header and its entry in one BITFIELD. Once 4 kB
 * of entries have left, the live ones are written whole (SET … PX, which renews the TTL; one
 * GETRANGE of them for a long log); otherwise the TTL is renewed (PEXPIRE, two windows) once less
 * than a window of it is left: once per window. The reply names where the entry went, so its
 * settle writes it in place (weighted-settle.lua.ts).
 *
 * Entries are appended in admission order; with the Redis clock (one clock, never leased) their
 * times are in order, and the ones to leave are a prefix: the decision is exact. On the caller's
 * clock an entry stamped out of order leaves only once the ones before it have: it is counted a
 * little longer, never less (stricter, never looser).
 *
 * Why it is exact: the log's argument. A request of cost c is admitted iff the units of the
 * entries inside (now - window, now] plus c fit the limit, and nothing but time or a give-back
 * (settle, refund) lowers that sum.
 *
 * Redis commands: check = GETRANGE (the first 8 kB, at any length); commit = BITFIELD (+ PEXPIRE
 * once per window; GETRANGE + SET when it compacts). With TIME: 3 per admission, 2 per denial,
 * plus the EVALSHA. A log in the old layout (v1) costs its first admission one GETRANGE more
 * past 8 kB, and is written whole as v2. Settle: weighted-settle.lua.ts. Refund: GETRANGE of the
 * last 8 kB (back in ranges that double until the entry is found) + one BITFIELD in place.
 * Memory: ~50 bytes an admission in the window (a 14-character member id, two 13-digit numbers),
 * at most MAX_WEIGHTED_ENTRIES admissions (caps.ts): a request past them is denied until the
 * oldest leaves, whatever units are left.
 */
export const WEIGHTED_LOG_LUA = `${WL_CODEC}
ALG['sliding-log-weighted'] = {
  check = function(p, now)
    local v = wl_open(p.key, false)
    -- The entries at or before now - window leave, from the front.
    local floor, pos = now - p.window, v.pos
    while true do
      local t, u, _, nxt = wl_next(v, pos)
      if not t or t > floor then break end
      v.sum, v.n, pos = v.sum - u, v.n - 1, nxt
    end
    v.pos = pos
    p.v = v
    p.allowed = v.sum + p.cost <= p.limit and v.n < WL_MAX
  end,
  commit = function(p, now)
    local v = p.v
    v.sum, v.n = v.sum + p.cost, v.n + 1
    p.entry = wl_entry(p.member, p.stamp, p.cost, 'r')
    local key, life = p.key, 2 * p.window + GRACE
    if v.ver ~= 2 or v.pos - 1 - WL_HDR > 4096 then
      -- New, v1 (written as v2 from now on), or 4 kB of entries that have left: written whole,
      -- the TTL renewed with it.
      local live = ''
      if v.pos <= v.last then
        -- From what was read when it holds them all (a short log), else one read more.
        if v.off < v.pos and v.off + #v.s >= v.last then
          live = string.sub(v.s, v.pos - v.off, v.last - v.off)
        else
          live = redis.call('GETRANGE', key, v.pos - 1, v.last - 1)
        end
      end
      local body = live .. p.entry
      p.offset = #live
      redis.call('SET', key, wl_header(0, #body, v.n, v.sum, now + 2 * p.window) .. body,
        'PX', life)
      return
    end
    local exp = v.exp
    if exp < now + p.window then exp = now + 2 * p.window end
    -- The header after its magic, and the entry after the others: one BITFIELD.
    p.offset = v.last - WL_HDR
    local h = wl_header(v.pos - 1 - WL_HDR, p.offset + #p.entry, v.n, v.sum, exp)
    local a = wl_ops(wl_ops({}, 'SET', 3, string.sub(h, 3)), 'SET', v.last + 1, p.entry)
    redis.call('BITFIELD', key, unpack(a))
    if exp ~= v.exp then redis.call('PEXPIRE', key, life) end
  end,
  report = function(p, now, committed)
    local v = p.v
    local remaining = p.limit - v.sum
    if remaining < 0 then remaining = 0 end
    -- Capacity frees as the oldest entries leave: a denial waits until enough of them have (the
    -- units and the entries this request lacks); an admission names when the next one leaves.
    local need, go = 1, 0
    if not p.allowed then need, go = v.sum + p.cost - p.limit, v.n - WL_MAX + 1 end
    local freed, left, pos, appended = 0, 0, v.pos, p.entry
    while true do
      local t, u, _, nxt = wl_next(v, pos)
      if not t and appended then
        -- Past the stored entries: the one this admission appended.
        local at, cost = string.match(appended, ',(%d+),(%d+),')
        t, u, nxt, appended = tonumber(at), tonumber(cost), pos, nil
      end
      if not t then break end
      freed, left, pos = freed + u, left + 1, nxt
      if freed >= need and left >= go then
        -- An entry stamped after now (another isolate's clock ahead): no wait past one window.
        local reset = math.min(t, now) + p.window
        if p.allowed then return remaining, reset, 0 end
        return remaining, reset, math.max(0, reset - now)
      end
    end
    if p.allowed then return remaining, now + p.window, 0 end
    return remaining, now + p.window, p.window
  end,
  -- A usage rule's settle (settle-driver.lua.ts): the entry is its own once-gate (state s).
  settleGated = true,
  -- The evaluate reply names where an admission's entry went (settle's fast path).
  offsets = true,
}
${WL_SETTLE}`;
