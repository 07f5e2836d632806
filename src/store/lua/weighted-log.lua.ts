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
 * their count, where the first live one starts (the ones before it have left the window and wait
 * for the next compaction), when the key's TTL runs out, and where the entries end. So an
 * admission writes only its entry and the trailer, in one SETRANGE over the old trailer, and
 * reads the first 8 kB (a log that short: all of it, trailer included; a longer one: its trailer
 * too, a second GETRANGE), parsing only the entries that leave (and, for a denial's wait, the
 * oldest live ones, read on in 8 kB ranges when it needs more). Once 4 kB of entries have left,
 * the live ones are written whole (SET … PX, which renews the TTL; one GETRANGE of them for a
 * long log); otherwise the TTL is renewed (PEXPIRE, two windows) once less than a window of it
 * is left: once per window.
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
 * Redis commands: check = GETRANGE (two for a log past 8 kB); commit = SETRANGE (+ PEXPIRE once
 * per window; GETRANGE + SET when it compacts). With TIME: 3 per admission, 2 per denial (one
 * more past 8 kB), plus the EVALSHA. Refund and settle (settle-driver.lua.ts): GETRANGE of the
 * last 8 kB (back in ranges that double until the entry is found) + one SETRANGE from the entry
 * to the end (same length: the entry rewritten in place, the entries admitted after it, the
 * trailer): a prompt settle reads and writes a few entries whatever the log holds.
 * Memory: ~50 bytes an admission in the window (a 14-character member id, two 13-digit numbers),
 * at most MAX_WEIGHTED_ENTRIES admissions (caps.ts): a request past them is denied until the
 * oldest leaves, whatever units are left.
 */
const WL_CODEC = `
-- The most admissions one log holds in its window.
local WL_MAX = ${MAX_WEIGHTED_ENTRIES}
-- The most units the log's sum holds: 16 digits, and below 2^53 (exact in Lua's doubles).
local WL_SUM_MAX = 9000000000000000
-- The trailer: '|W', sum (16 digits), count (6), start (9: bytes before the first live entry),
-- expiry (15: the store-clock time the TTL was last set to end), end (10: bytes of entries).
local WL_TL = 58
-- Bytes read at a time: a log this short is read whole, in one command.
local WL_READ = 8192
-- Longer than any entry: a range read for one ends at least this far past its start.
local WL_EMAX = 160
local WL_ENTRY = '^[^,;|]*,(%d+),(%d+),([rsx]);()'

-- A log as read so far: \`s\` holds its bytes from \`off\` + 1 on (absolute, 1-based), \`last\` is
-- where its entries end, \`pos\` where the live ones start.
local function wl_view(key, s, off, t)
  local v = { key = key, s = s, off = off, last = 0, sum = 0, n = 0, pos = 1, exp = 0 }
  if t and #t == WL_TL and string.match(t, '^|W%d+$') then
    v.sum, v.n = tonumber(string.sub(t, 3, 18)), tonumber(string.sub(t, 19, 24))
    v.pos, v.exp = tonumber(string.sub(t, 25, 33)) + 1, tonumber(string.sub(t, 34, 48))
    v.last = tonumber(string.sub(t, 49, 58))
  else
    -- Absent, or not this layout (another writer): empty, and written whole by the next admission.
    v.s, v.off = '', 0
  end
  return v
end

-- Reads a log from its start (an admission: the oldest entries are what it needs), or from its
-- end (a settle: the newest). A log shorter than WL_READ is one read either way.
local function wl_open(key, fromEnd)
  local s
  if fromEnd then
    s = redis.call('GETRANGE', key, -WL_READ, -1)
  else
    s = redis.call('GETRANGE', key, 0, WL_READ - 1)
  end
  if #s < WL_READ then return wl_view(key, s, 0, string.sub(s, -WL_TL)) end
  if fromEnd then
    local v = wl_view(key, s, 0, string.sub(s, -WL_TL))
    v.off = v.last + WL_TL - WL_READ
    return v
  end
  return wl_view(key, s, 0, redis.call('GETRANGE', key, -WL_TL, -1))
end

-- The entry at \`pos\` (absolute): its time, units, state and where the next starts; nil past the
-- entries. Reads on from \`pos\` when what is held ends too soon.
local function wl_next(v, pos)
  if pos > v.last then return nil end
  local rel = pos - v.off
  if rel < 1 or (rel + WL_EMAX > #v.s and v.off + #v.s < v.last) then
    v.s, v.off, rel = redis.call('GETRANGE', v.key, pos - 1, pos + WL_READ - 2), pos - 1, 1
  end
  local t, u, state, nxt = string.match(v.s, WL_ENTRY, rel)
  if not t then return nil end
  return tonumber(t), tonumber(u), state, nxt + v.off
end

local function wl_trailer(sum, n, pos, exp, last)
  return string.format('|W%016.0f%06d%09d%015.0f%010d', sum, n, pos - 1, exp, last)
end

local function wl_entry(member, t, units, state)
  return member .. ',' .. string.format('%013.0f', t) .. ',' .. string.format('%013.0f', units) ..
    ',' .. state .. ';'
end

-- Where \`member\`'s live entry starts (absolute), its time, units, state and the byte after it;
-- nil when it is not there. Searched back from the newest, in ranges that double (a settle soon
-- after its admission finds it among the few admitted since: one read).
local function wl_find(v, member)
  local needle, size = member .. ',', math.max(#v.s, WL_READ)
  while true do
    local from = math.max(v.pos - v.off, 1)
    while true do
      local at = string.find(v.s, needle, from, true)
      if not at or at + v.off > v.last then break end
      local abs = at + v.off
      if abs == v.pos or (at > 1 and string.sub(v.s, at - 1, at - 1) == ';') then
        local t, u, state, nxt = string.match(v.s, WL_ENTRY, at)
        if t then return abs, tonumber(t), tonumber(u), state, nxt + v.off end
      end
      from = at + 1
    end
    -- What was read holds every live entry: not there.
    if v.off < v.pos then return nil end
    size = 2 * size
    local first = math.max(v.pos, v.last - size + 1)
    v.s, v.off = redis.call('GETRANGE', v.key, first - 1, v.last - 1), first - 1
  end
end

-- The entry at \`at\` (ending before \`nxt\`) rewritten as \`entry\` (same length), the entries after
-- it and the trailer: one SETRANGE, what a refund and a settle write.
local function wl_rewrite(v, at, nxt, entry, sum)
  local after = string.sub(v.s, nxt - v.off, v.last - v.off)
  redis.call('SETRANGE', v.key, at - 1, entry .. after .. wl_trailer(sum, v.n, v.pos, v.exp, v.last))
end
`;

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
    if v.last == 0 or v.pos - 1 > 4096 then
      -- New, or 4 kB of entries that have left: written whole, the TTL renewed with it.
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
      redis.call('SET', key, body .. wl_trailer(v.sum, v.n, 1, now + 2 * p.window, #body), 'PX', life)
      return
    end
    local exp = v.exp
    if exp < now + p.window then exp = now + 2 * p.window end
    redis.call('SETRANGE', key, v.last,
      p.entry .. wl_trailer(v.sum, v.n, v.pos, exp, v.last + #p.entry))
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
  refund = REFUNDS and function(p, now)
    -- Exact: the request's entry keeps its place with 0 units (state x), its units off the sum.
    local v = wl_open(p.key, true)
    local at, t, u, state, nxt = wl_find(v, p.member)
    if not at or state == 'x' then return 0 end
    wl_rewrite(v, at, nxt, wl_entry(p.member, t, 0, 'x'), v.sum - u)
    return u
  end,
  -- A usage rule's settle (settle-driver.lua.ts): the entry is its own once-gate (state s).
  settleGated = true,
  -- The request's live entry: found (p.already when settled before), or nil.
  settleFind = REFUNDS and function(p, now)
    local v = wl_open(p.key, true)
    local at, t, u, state, nxt = wl_find(v, p.member)
    if not at or state == 'x' then return nil end
    p.v, p.e, p.already = v, { at = at, t = t, u = u, nxt = nxt }, state == 's'
    return true
  end,
  -- The entry takes the units used and is marked settled; the log's sum moves by the difference
  -- (more charged even past the limit, less given back). Returns the charge.
  settleWrite = REFUNDS and function(p, used)
    local e = p.e
    -- The sum stays within its 16 digits and exact in a double (< 2^53): a charge past
    -- WL_SUM_MAX is cut to what fits. A log that full denies every request anyway (limits are at
    -- most 10^12), and what leaves the window later is what was written: the sum stays true.
    used = math.min(used, e.u + math.max(0, WL_SUM_MAX - p.v.sum))
    wl_rewrite(p.v, e.at, e.nxt, wl_entry(p.member, e.t, used, 's'), p.v.sum + used - e.u)
    return used - e.u
  end,
}
`;
