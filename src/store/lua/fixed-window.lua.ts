/**
 * Fixed windows aligned to the epoch (window i covers [i·window, (i+1)·window)), as a fragment of
 * the composed scripts (see scripts.ts).
 *
 * Key: a string `<window index>:<count>`. The window index lives in the value, not in the key
 * name: with the Redis clock the index is only known inside the script, and every key a script
 * touches must be in KEYS (Upstash's allow-key-locking). It also keeps the count exact on the
 * caller's clock, whose windows need not line up with Redis's expiry. TTL: the window's end
 * (plus GRACE on the caller's clock, see scripts.ts).
 *
 * Redis commands: check = GET; commit = SET … PX. Allowed: 2; denied: 1. Refund: GET, SET KEEPTTL.
 * Accuracy: exact per window, but up to 2 × limit can pass within one window's length across a
 * boundary (the end of one window and the start of the next).
 */
export const FIXED_WINDOW_LUA = `
local function fw_load(p, now, adopt)
  p.idx = math.floor(now / p.window)
  p.count = 0
  local value = redis.call('GET', p.key)
  if value then
    local idx, count = string.match(value, '^(%-?%d+):(%d+)$')
    idx = tonumber(idx)
    -- On the caller's clock a faster isolate may already count in a later window: a check
    -- (adopt) counts in that one too and never writes an older index over it (isolates would
    -- reset each other's counts at every boundary and over-admit). A refund must not adopt.
    if idx == p.idx or (adopt and idx ~= nil and idx > p.idx) then
      p.idx, p.count = idx, tonumber(count)
    end
  end
end

ALG['fixed-window'] = {
  check = function(p, now)
    fw_load(p, now, true)
    p.allowed = p.count + p.cost <= p.limit
  end,
  commit = function(p, now)
    p.count = p.count + p.cost
    redis.call('SET', p.key, p.idx .. ':' .. p.count, 'PX', (p.idx + 1) * p.window - now + GRACE)
  end,
  report = function(p, now, committed)
    -- Everything frees at the window's end; cost <= limit, so a denied cost fits then.
    local ends = (p.idx + 1) * p.window
    if p.allowed then return p.limit - p.count, ends, 0 end
    return p.limit - p.count, ends, ends - now
  end,
  refund = function(p, now)
    -- Best effort: the units come off the window the request was counted in (p.at), if that
    -- window is still the stored one; a refund for a later window gives back nothing.
    local at = p.at
    fw_load(p, at)
    if p.count == 0 then return 0 end
    local units = math.min(p.cost, p.count)
    redis.call('SET', p.key, p.idx .. ':' .. (p.count - units), 'KEEPTTL')
    return units
  end,
}
`;
