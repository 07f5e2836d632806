/**
 * The weighted sliding log (`sliding-log-weighted`), as a fragment of the composed scripts (see
 * scripts.ts for the interface): each admission is one entry with its units, so memory grows with
 * the requests in the window, not with the units (a usage rule's limit may be 10^12 tokens; the
 * ring's 4 bytes a unit could not hold that).
 *
 * Layout: one string, `W<sum>;` then one entry per admission in the window, oldest first:
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
 * Memory: 30–45 bytes an admission in the window (a 14-character member id, a 13-digit time).
 */
export const WEIGHTED_LOG_LUA = `
-- The stored log: its sum and the entries from \`pos\` on (the header and expired ones skipped).
local function wl_read(key)
  local s = redis.call('GET', key)
  if not s then return 0, '', 1 end
  local sum, pos = string.match(s, '^W(%d+);()')
  -- Not this layout (another writer): counted as empty, and overwritten by the next admission.
  if not sum then return 0, '', 1 end
  return tonumber(sum), s, pos
end

-- Drops the entries at or before \`floor\` from the front: the sum and where the live ones start.
local function wl_trim(s, pos, sum, floor)
  while true do
    local t, u, nxt = string.match(s, '^[^,;]*,(%d+),(%d+),[rs];()', pos)
    if not t or tonumber(t) > floor then return sum, pos end
    sum, pos = sum - tonumber(u), nxt
  end
end

local function wl_num(x)
  return string.format('%.0f', x)
end

ALG['sliding-log-weighted'] = {
  check = function(p, now)
    local sum, s, pos = wl_read(p.key)
    p.sum, p.pos = wl_trim(s, pos, sum, now - p.window)
    p.s = s
    p.allowed = p.sum + p.cost <= p.limit
  end,
  commit = function(p, now)
    p.sum = p.sum + p.cost
    p.entry = p.member .. ',' .. wl_num(p.stamp) .. ',' .. wl_num(p.cost) .. ',r;'
    redis.call('SET', p.key, 'W' .. wl_num(p.sum) .. ';' .. string.sub(p.s, p.pos) .. p.entry,
      'PX', p.window + GRACE)
  end,
  report = function(p, now, committed)
    local remaining = p.limit - p.sum
    if remaining < 0 then remaining = 0 end
    -- Capacity frees as the oldest entries leave: a denial waits until enough of them have (the
    -- units this request lacks); an admission names when the next one leaves.
    local need = 1
    if not p.allowed then need = p.sum + p.cost - p.limit end
    local freed, pos = 0, p.pos
    local s = p.s
    if p.entry then s = s .. p.entry end
    while true do
      local t, u, nxt = string.match(s, '^[^,;]*,(%d+),(%d+),[rs];()', pos)
      if not t then break end
      freed, pos = freed + tonumber(u), nxt
      if freed >= need then
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
    local sum, s, pos = wl_read(p.key)
    local at = string.find(s, ';' .. p.member .. ',', pos - 1, true)
    if not at then return 0 end
    local u, nxt = string.match(s, '^;[^,;]*,%d+,(%d+),[rs];()', at)
    if not u then return 0 end
    u = tonumber(u)
    redis.call('SET', p.key, 'W' .. wl_num(sum - u) .. string.sub(s, pos - 1, at) ..
      string.sub(s, nxt), 'KEEPTTL')
    return u
  end,
}
`;
