/**
 * The token bucket as GCRA (generic cell rate algorithm) — a fragment of the composed scripts
 * (see scripts.ts). Capacity `limit` tokens, refilled continuously at `limit` per `window`, so
 * one token every window/limit ms.
 *
 * Key: a string `<ms>:<fraction>:<limit>` — the theoretical arrival time (TAT): when the bucket will be
 * full again, as whole ms plus a numerator over `limit`. Time is counted in units of 1/limit ms,
 * so one token is exactly `window` units and every comparison is integer arithmetic (below 2^53
 * for limits ≤ 10^5 and windows ≤ 7 days): no float drift, a burst of `limit` always fits in an
 * idle bucket. The debt d = (TAT − now)·limit (≥ 0) is what the bucket lacks from full; a request
 * of cost c passes when d + c·window ≤ limit·window and then raises TAT by c·window/limit.
 * A denied request leaves TAT untouched. TTL: until the bucket is full again (then the key is
 * the same as absent).
 *
 * Redis commands: check = GET; commit = SET … PX. Allowed: 2; denied: 1.
 * Refund: GET, then SET … PX or DEL (best effort: the bucket never holds more than `limit`).
 */
export const TOKEN_BUCKET_LUA = `
local function tb_load(p, now)
  p.debt = 0
  local value = redis.call('GET', p.key)
  if value then
    local ms, frac, limit = string.match(value, '^(%-?%d+):(%d+):?(%d*)$')
    limit = tonumber(limit) or p.limit
    -- The fraction is in 1/limit ms of the limit it was written with: if the rule's limit has
    -- changed since, convert it (rounding the debt up, never down).
    local debt = (tonumber(ms) - now) * p.limit + math.ceil(tonumber(frac) * p.limit / limit)
    if debt > 0 then p.debt = debt end
  end
end

local function tb_store(p, now)
  local ms = now + math.floor(p.debt / p.limit)
  local frac = p.debt % p.limit
  -- The bucket is full again after ceil(debt / limit) ms: exactly when the key may vanish.
  redis.call('SET', p.key, ms .. ':' .. frac .. ':' .. p.limit, 'PX',
    math.ceil(p.debt / p.limit) + GRACE)
end

ALG['token-bucket'] = {
  check = function(p, now)
    tb_load(p, now)
    p.allowed = p.debt + p.cost * p.window <= p.limit * p.window
  end,
  commit = function(p, now)
    p.debt = p.debt + p.cost * p.window
    tb_store(p, now)
  end,
  report = function(p, now, committed)
    local full = p.limit * p.window
    local remaining = math.floor((full - p.debt) / p.window)
    if p.allowed then
      -- When the next token arrives (now when the bucket is full).
      if remaining >= p.limit then return remaining, now, 0 end
      return remaining, now + math.ceil((p.debt - full + (remaining + 1) * p.window) / p.limit), 0
    end
    -- When enough tokens for this cost exist.
    local wait = math.ceil((p.debt + p.cost * p.window - full) / p.limit)
    return remaining, now + wait, wait
  end,
  refund = function(p, now)
    -- Best effort: give the tokens back, but never more than the bucket lacks from full.
    tb_load(p, now)
    if p.debt == 0 then return 0 end
    local units = math.min(p.cost, math.floor(p.debt / p.window))
    p.debt = p.debt - p.cost * p.window
    if p.debt <= 0 then
      redis.call('DEL', p.key)
    else
      tb_store(p, now)
    end
    return units
  end,
}
`;
