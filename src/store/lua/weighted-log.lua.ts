import { MAX_WEIGHTED_ENTRIES } from "../caps";

/**
 * The weighted sliding log (`sliding-log-weighted`), as a fragment of the composed scripts (see
 * scripts.ts for the interface): each admission is one entry with its units, so memory grows with
 * the requests in the window, not with the units (a usage rule's limit may be 10^12 tokens; the
 * ring's 4 bytes a unit could not hold that).
 *
 * Layout: one string, `W<sum>:<count>;` then one entry per admission in the window, oldest first:
 * `<member>,<time>,<units>,<r|s>;` — the admission's member id, its time, the units it holds now
 * (its reservation, then what settle made of it) and whether it was settled (`s`). `sum` is the
 * units of every entry, kept as entries come and go, so a decision reads no entry past the first
 * live one. Entries are appended in admission order; with the Redis clock (one clock, never
 * leased) their times are in order, and the ones to leave are a prefix: the decision is exact.
 * On the caller's clock an entry stamped out of order leaves only once the ones before it have:
 * it is counted a little longer, never less (stricter, never looser).
 *
 * Why it is exact: the same argument as the log's. A request of cost c is admitted iff the units
 * of the entries inside (now - window, now] plus c fit the limit, and nothing but time or a
 * give-back (settle, refund) lowers that sum.
 *
 * Redis commands: check = GET; commit = SET … PX (the window, plus GRACE on the caller's clock:
 * a key with no admission for a window holds nothing live). With TIME: 3 per admission, 2 per
 * denial, plus the EVALSHA. Refund: GET + SET KEEPTTL. Settle: weighted-settle.lua.ts.
 * Memory: 30–45 bytes an admission in the window (a 14-character member id, a 13-digit time),
 * at most MAX_WEIGHTED_ENTRIES admissions (caps.ts): a request past them is denied until the
 * oldest leaves, whatever units are left. Each admission reads and rewrites the whole string:
 * O(admissions in the window) bytes.
 */
export const WEIGHTED_LOG_LUA = `
-- The most admissions one log holds in its window: what bounds its memory and the bytes each
-- admission reads and writes (a limit of 10^12 tokens at a reservation of 1 would not).
local WL_MAX = ${MAX_WEIGHTED_ENTRIES}

-- The stored log: its sum, its entries' count and the entries from \`pos\` on (the header skipped).
local function wl_read(key)
  local s = redis.call('GET', key)
  if not s then return 0, 0, '', 1 end
  local sum, n, pos = string.match(s, '^W(%d+):(%d+);()')
  -- Not this layout (another writer): counted as empty, and overwritten by the next admission.
  if not sum then return 0, 0, '', 1 end
  return tonumber(sum), tonumber(n), s, pos
end

-- Drops the entries at or before \`floor\` from the front: the sum, count and where the live start.
local function wl_trim(s, pos, sum, n, floor)
  while true do
    local t, u, nxt = string.match(s, '^[^,;]*,(%d+),(%d+),[rs];()', pos)
    if not t or tonumber(t) > floor then return sum, n, pos end
    sum, n, pos = sum - tonumber(u), n - 1, nxt
  end
end

local function wl_num(x)
  return string.format('%.0f', x)
end

ALG['sliding-log-weighted'] = {
  check = function(p, now)
    local sum, n, s, pos = wl_read(p.key)
    p.sum, p.n, p.pos = wl_trim(s, pos, sum, n, now - p.window)
    p.s = s
    p.allowed = p.sum + p.cost <= p.limit and p.n < WL_MAX
  end,
  commit = function(p, now)
    p.sum, p.n = p.sum + p.cost, p.n + 1
    p.entry = p.member .. ',' .. wl_num(p.stamp) .. ',' .. wl_num(p.cost) .. ',r;'
    redis.call('SET', p.key, 'W' .. wl_num(p.sum) .. ':' .. p.n .. ';' .. string.sub(p.s, p.pos) ..
      p.entry, 'PX', p.window + GRACE)
  end,
  report = function(p, now, committed)
    local remaining = p.limit - p.sum
    if remaining < 0 then remaining = 0 end
    -- Capacity frees as the oldest entries leave: a denial waits until enough of them have (the
    -- units and the entries this request lacks); an admission names when the next one leaves.
    local need, go = 1, 0
    if not p.allowed then need, go = p.sum + p.cost - p.limit, p.n - WL_MAX + 1 end
    local freed, left, pos, s, appended = 0, 0, p.pos, p.s, p.entry
    while true do
      local t, u, nxt = string.match(s, '^[^,;]*,(%d+),(%d+),[rs];()', pos)
      if not t and appended then
        -- Past the stored entries: the one this admission appended.
        s, pos, appended = appended, 1, nil
        t, u, nxt = string.match(s, '^[^,;]*,(%d+),(%d+),[rs];()', pos)
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
    -- Exact: the request's entry goes, with its units (reserved or settled) off the sum.
    local sum, n, s, pos = wl_read(p.key)
    local at = string.find(s, ';' .. p.member .. ',', pos - 1, true)
    if not at then return 0 end
    local u, nxt = string.match(s, '^;[^,;]*,%d+,(%d+),[rs];()', at)
    if not u then return 0 end
    u = tonumber(u)
    redis.call('SET', p.key, 'W' .. wl_num(sum - u) .. ':' .. (n - 1) .. string.sub(s, pos - 1, at) ..
      string.sub(s, nxt), 'KEEPTTL')
    return u
  end,
}
`;
