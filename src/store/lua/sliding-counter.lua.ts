/**
 * The sliding-window counter: two aligned fixed windows, weighted — a fragment of the composed
 * scripts (see scripts.ts).
 *
 * The estimate at elapsed time e into the current window is
 *   previous count × (window − e) / window + current count,
 * i.e. it assumes the previous window's admissions were spread evenly over it. A request of cost
 * c passes when estimate + c ≤ limit; the comparison is done in integers
 * (prev·(window − e) + (cur + c)·window ≤ limit·window, exact below 2^53), so there is no rounding
 * in the admission itself. A denied request consumes nothing: the counters are left untouched.
 *
 * Key: a string `<window index>:<current count>:<previous count>` — O(1) memory whatever the
 * limit. The index lives in the value (see fixed-window.lua.ts for why). TTL: until the current
 * window's count stops mattering, the end of the next window.
 *
 * Redis commands: check = GET; commit = SET … PX. Allowed: 2; denied: 1. Refund: GET, SET KEEPTTL.
 * Accuracy: never admits more than the limit within any window-aligned pair under even traffic;
 * with bursty traffic the real count over a sliding window can deviate from the limit either way
 * (a burst at the end of the previous window is under-weighted early in the next).
 */
export const SLIDING_COUNTER_LUA = `
local function sc_load(p, now)
  local window = p.window
  p.idx = math.floor(now / window)
  p.start = p.idx * window
  p.cur, p.prev = 0, 0
  local value = redis.call('GET', p.key)
  if value then
    local idx, cur, prev = string.match(value, '^(%-?%d+):(%d+):(%d+)$')
    idx = tonumber(idx)
    if idx ~= nil and idx >= p.idx then
      -- idx > p.idx only on the caller's clock, when a faster isolate has moved on: count in its
      -- window (the previous window then weighs more than its share: conservative), and never
      -- write an older index over it.
      p.idx, p.start = idx, idx * window
      p.cur, p.prev = tonumber(cur), tonumber(prev)
    elseif idx == p.idx - 1 then
      p.prev = tonumber(cur)
    end
  end
end

-- The earliest time (ms, >= now) at which a request of cost c fits, assuming nobody else consumes.
local function sc_fits_at(p, c, now)
  local window, limit = p.window, p.limit
  if p.cur + c <= limit then
    if p.prev == 0 then return now end
    -- prev·(window − e) ≤ (limit − cur − c)·window  ⇔  e ≥ window − (limit − cur − c)·window/prev
    local e = window - math.floor((limit - p.cur - c) * window / p.prev)
    if e < window then return math.max(p.start + e, now) end
  end
  -- Not in this window: in the next, the current count becomes the weighted previous one.
  if p.cur == 0 then return p.start + window end
  local e = window - math.floor((limit - c) * window / p.cur)
  return p.start + window + math.max(e, 0)
end

local function sc_remaining(p, now)
  local window = p.window
  local free = p.limit * window - p.prev * (window - (now - p.start)) - p.cur * window
  return math.max(0, math.floor(free / window))
end

ALG['sliding-counter'] = {
  check = function(p, now)
    sc_load(p, now)
    local window = p.window
    p.allowed = p.prev * (window - (now - p.start)) + (p.cur + p.cost) * window
      <= p.limit * window
  end,
  commit = function(p, now)
    p.cur = p.cur + p.cost
    redis.call('SET', p.key, p.idx .. ':' .. p.cur .. ':' .. p.prev, 'PX',
      p.start + 2 * p.window - now + GRACE)
  end,
  report = function(p, now, committed)
    local remaining = sc_remaining(p, now)
    if p.allowed then
      -- When the next unit frees: the estimate falls by enough for one more unit.
      if remaining >= p.limit then return remaining, now, 0 end
      return remaining, sc_fits_at(p, remaining + 1, now), 0
    end
    local at = sc_fits_at(p, p.cost, now)
    return remaining, at, at - now
  end,
  refund = function(p, now)
    -- Best effort: take the units off the window the request was counted in (p.at) if it is
    -- still the current or the previous one; otherwise they no longer weigh anything.
    local window = p.window
    local counted = math.floor(p.at / window)
    sc_load(p, now)
    local units = 0
    if counted == p.idx then
      units = math.min(p.cost, p.cur)
      p.cur = p.cur - units
    elseif counted == p.idx - 1 then
      units = math.min(p.cost, p.prev)
      p.prev = p.prev - units
    end
    if units == 0 then return 0 end
    redis.call('SET', p.key, p.idx .. ':' .. p.cur .. ':' .. p.prev, 'KEEPTTL')
    return units
  end,
}
`;
