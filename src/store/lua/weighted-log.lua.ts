import { MAX_WEIGHTED_ENTRIES } from "../caps";

/**
 * The weighted sliding log (`sliding-log-weighted`), as a fragment of the composed scripts (see
 * scripts.ts for the interface): each admission is one entry with its units, so memory grows with
 * the requests in the window, not with the units (a usage rule's limit may be 10^12 tokens; the
 * ring's 4 bytes a unit could not hold that).
 *
 * Layout: one string of entries, oldest first, then a fixed-width trailer (WL_CODEC below). An
 * entry is `<member>,<time>,<units>,<state>;`: the admission's member id, its time and the units
 * it holds now (13 digits each: its reservation, then what settle made of it), and `r` reserved,
 * `s` settled, `x` refunded (0 units). The trailer holds the units of every live entry (`sum`),
 * their count, where the first live one starts (the ones before it have left the window and
 * wait for the next compaction) and when the key's TTL runs out. So an admission writes only its
 * entry and the trailer, in one SETRANGE over the old trailer: O(1) bytes whatever the log holds.
 * It reads the string whole (GET) but parses only the entries that leave (and, for a denial's
 * wait, the oldest live ones). A dead prefix longer than 4 kB and than the live entries is
 * dropped by writing the log whole (SET … PX), which also renews the TTL; otherwise the TTL is
 * renewed (PEXPIRE, two windows) once less than a window of it is left: once per window.
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
 * Redis commands: check = GET; commit = SETRANGE (+ PEXPIRE once per window; SET … PX when it
 * compacts). With TIME: 3 per admission, 2 per denial, plus the EVALSHA. Refund and settle
 * (weighted-settle.lua.ts): GET + one SETRANGE from the entry to the end (same length: the entry
 * rewritten in place, then the entries admitted after it, then the trailer).
 * Memory: ~50 bytes an admission in the window (a 14-character member id, two 13-digit numbers),
 * at most MAX_WEIGHTED_ENTRIES admissions (caps.ts): a request past them is denied until the
 * oldest leaves, whatever units are left.
 */
export const WL_CODEC = `
-- The most admissions one log holds in its window.
local WL_MAX = ${MAX_WEIGHTED_ENTRIES}
-- The trailer: '|W', sum (16 digits), count (6), start (9: bytes before the first live entry),
-- expiry (15: the store-clock time the TTL was last set to end).
local WL_TL = 48
local WL_ENTRY = '^[^,;|]*,(%d+),(%d+),([rsx]);()'

-- A log: its string (or ''), where its entries end (1-based, the last byte before the trailer),
-- sum, count, first live entry (1-based) and TTL end. An absent or foreign value is empty.
local function wl_read(key)
  local s = redis.call('GET', key)
  if type(s) == 'string' and #s >= WL_TL then
    local t = string.sub(s, -WL_TL)
    if string.match(t, '^|W%d+$') then
      return s, #s - WL_TL, tonumber(string.sub(t, 3, 18)), tonumber(string.sub(t, 19, 24)),
        tonumber(string.sub(t, 25, 33)) + 1, tonumber(string.sub(t, 34))
    end
  end
  return '', 0, 0, 0, 1, 0
end

local function wl_trailer(sum, n, pos, exp)
  return string.format('|W%016.0f%06d%09d%015.0f', sum, n, pos - 1, exp)
end

local function wl_entry(member, t, units, state)
  return member .. ',' .. string.format('%013.0f', t) .. ',' .. string.format('%013.0f', units) ..
    ',' .. state .. ';'
end

-- Where \`member\`'s entry starts among the live ones (1-based), its time, units, state and the
-- byte after it; nil when it is not there.
local function wl_find(s, pos, last, member)
  local init = pos
  while true do
    local at = string.find(s, member .. ',', init, true)
    if not at or at > last then return nil end
    if at == pos or string.sub(s, at - 1, at - 1) == ';' then
      local t, u, state, nxt = string.match(s, WL_ENTRY, at)
      if t and string.sub(s, at, at + #member) == member .. ',' then
        return at, tonumber(t), tonumber(u), state, nxt
      end
    end
    init = at + 1
  end
end

-- The entry at \`at\` (ending before \`nxt\`) rewritten as \`entry\` (same length), the entries after
-- it and the trailer: one SETRANGE, what a refund and a settle write.
local function wl_rewrite(key, s, last, at, nxt, entry, trailer)
  redis.call('SETRANGE', key, at - 1, entry .. string.sub(s, nxt, last) .. trailer)
end
`;

export const WEIGHTED_LOG_LUA = `${WL_CODEC}
-- Drops the entries at or before \`floor\` from the front: the sum, count and first live entry.
local function wl_trim(s, pos, last, sum, n, floor)
  while pos <= last do
    local t, u, _, nxt = string.match(s, WL_ENTRY, pos)
    if not t or tonumber(t) > floor then break end
    sum, n, pos = sum - tonumber(u), n - 1, nxt
  end
  return sum, n, pos
end

ALG['sliding-log-weighted'] = {
  check = function(p, now)
    local s, last, sum, n, pos, exp = wl_read(p.key)
    p.s, p.last, p.exp = s, last, exp
    p.sum, p.n, p.pos = wl_trim(s, pos, last, sum, n, now - p.window)
    p.allowed = p.sum + p.cost <= p.limit and p.n < WL_MAX
  end,
  commit = function(p, now)
    p.sum, p.n = p.sum + p.cost, p.n + 1
    p.entry = wl_entry(p.member, p.stamp, p.cost, 'r')
    local key, life = p.key, 2 * p.window + GRACE
    local dead, live = p.pos - 1, p.last - p.pos + 1
    if p.last == 0 or (dead > 4096 and dead > live) then
      -- New, or mostly entries that have left: written whole, the TTL renewed with it.
      local body = string.sub(p.s, p.pos, p.last) .. p.entry
      redis.call('SET', key, body .. wl_trailer(p.sum, p.n, 1, now + 2 * p.window), 'PX', life)
      return
    end
    local exp = p.exp
    if exp < now + p.window then exp = now + 2 * p.window end
    redis.call('SETRANGE', key, p.last, p.entry .. wl_trailer(p.sum, p.n, p.pos, exp))
    if exp ~= p.exp then redis.call('PEXPIRE', key, life) end
  end,
  report = function(p, now, committed)
    local remaining = p.limit - p.sum
    if remaining < 0 then remaining = 0 end
    -- Capacity frees as the oldest entries leave: a denial waits until enough of them have (the
    -- units and the entries this request lacks); an admission names when the next one leaves.
    local need, go = 1, 0
    if not p.allowed then need, go = p.sum + p.cost - p.limit, p.n - WL_MAX + 1 end
    local freed, left, pos, s, last, appended = 0, 0, p.pos, p.s, p.last, p.entry
    while true do
      local t, u, st, nxt
      if pos <= last then t, u, st, nxt = string.match(s, WL_ENTRY, pos) end
      if not t and appended then
        -- Past the stored entries: the one this admission appended.
        s, pos, last, appended = appended, 1, #appended, nil
        t, u, st, nxt = string.match(s, WL_ENTRY, pos)
      end
      if not t then break end
      freed, left, pos = freed + tonumber(u), left + 1, nxt
      if freed >= need and left >= go then
        -- An entry stamped after now (another isolate's clock ahead): no wait past one window.
        local reset = math.min(tonumber(t), now) + p.window
        if p.allowed then return remaining, reset, 0 end
        return remaining, reset, math.max(0, reset - now)
      end
    end
    if p.allowed then return remaining, now + p.window, 0 end
    return remaining, now + p.window, p.window
  end,
  refund = REFUNDS and function(p, now)
    -- Exact: the request's entry keeps its place with 0 units (state x), its units off the sum.
    local s, last, sum, n, pos, exp = wl_read(p.key)
    local at, t, u, state, nxt = wl_find(s, pos, last, p.member)
    if not at or state == 'x' then return 0 end
    wl_rewrite(p.key, s, last, at, nxt, wl_entry(p.member, t, 0, 'x'), wl_trailer(sum - u, n, pos, exp))
    return u
  end,
}
`;
