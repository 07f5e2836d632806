/**
 * The token bucket as GCRA (generic cell rate algorithm) — a fragment of the composed scripts
 * (see scripts.ts). Capacity `limit` tokens, refilled continuously at `limit` per `window`, so
 * one token every window/limit ms.
 *
 * Key: a string `<ms>:<fraction>:<limit>:<window>` — the theoretical arrival time (TAT): when the
 * bucket will be full again, as whole ms plus a numerator over `limit`, and the window it was
 * written with. Time is counted in units of 1/limit ms, so one token is exactly `window` units
 * and every comparison is integer arithmetic (below 2^53 for limits ≤ 10^5 and windows ≤ 7 days):
 * no float drift, a burst of `limit` always fits in an idle bucket. The debt d = (TAT − now)·limit (≥ 0) is what the bucket lacks from full; a request
 * of cost c passes when d + c·window ≤ limit·window and then raises TAT by c·window/limit.
 * A denied request leaves TAT untouched. TTL: until the bucket is full again (then the key is
 * the same as absent).
 *
 * A rule's limit or window can change, and two versions of a rule share this key during a
 * rolling deploy. What carries over is the share of the bucket in use: the time to full again
 * (TAT − now) as a share of the writer's window. With the same window that is the time itself
 * (a new limit refills the same empty bucket at its own rate: no free tokens). With another
 * window the time is scaled, and until this rule writes, that bucket keeps draining at its
 * writer's pace (a denial writes nothing), so a wait is computed at that pace: honest, and at
 * most cost × the writer's window / limit — never beyond the longer window. Read as a time
 * instead, a 7-day bucket would leave a 1-day rule empty for 6 days; clamped to this rule's
 * window at each read, the stored time would not move and every Retry-After would be too short.
 *
 * Values written before the window was stored (`<ms>:<frac>[:<limit>]`) are read as written with
 * this rule's window, as the code that wrote them did. A debt beyond full (another window's
 * bucket, a clock skew) reports 0 remaining, not fewer.
 *
 * Redis commands: check = GET; commit = SET … PX. Allowed: 2; denied: 1.
 * Refund: GET, then SET … PX or DEL (best effort: the bucket never holds more than `limit`). The
 * units it reports round a partial token up: the bucket lacked it and has it back (rounding down
 * reported 1 of 2 units refunded 3 ms after the admission).
 */
export const TOKEN_BUCKET_LUA = `
-- p.rate: units per ms at which p.debt falls until this rule writes (p.limit for its own window).
local function tb_load(p, now)
  p.debt, p.rate = 0, p.limit
  local value = redis.call('GET', p.key)
  if value then
    local ms, frac, limit, window = string.match(value, '^(%-?%d+):(%d+):?(%d*):?(%d*)$')
    if not ms then return end
    limit = tonumber(limit) or p.limit
    window = tonumber(window) or p.window
    local debt
    if window == p.window then
      -- The fraction is in 1/limit ms of the limit it was written with: if the rule's limit has
      -- changed since, convert it (rounding the debt up, never down).
      debt = (tonumber(ms) - now) * p.limit + math.ceil(tonumber(frac) * p.limit / limit)
    else
      local ahead = tonumber(ms) - now + tonumber(frac) / limit
      p.rate = p.limit * p.window / window
      debt = math.ceil(ahead * p.rate)
    end
    if debt > 0 then p.debt = debt end
  end
end

local function tb_store(p, now)
  local ms = now + math.floor(p.debt / p.limit)
  local frac = p.debt % p.limit
  -- The bucket is full again after ceil(debt / limit) ms: exactly when the key may vanish.
  redis.call('SET', p.key, ms .. ':' .. frac .. ':' .. p.limit .. ':' .. p.window, 'PX',
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
    p.rate = p.limit
  end,
  report = function(p, now, committed)
    local full = p.limit * p.window
    local remaining = math.max(0, math.floor((full - p.debt) / p.window))
    if p.allowed then
      -- When the next token arrives (now when the bucket is full).
      if remaining >= p.limit then return remaining, now, 0 end
      return remaining, now + math.ceil((p.debt - full + (remaining + 1) * p.window) / p.rate), 0
    end
    -- A cost above the limit never fits (callers refuse it).
    if p.cost > p.limit then return remaining, now + p.window, p.window end
    -- When enough tokens for this cost exist.
    local wait = math.ceil((p.debt + p.cost * p.window - full) / p.rate)
    return remaining, now + wait, wait
  end,
  refund = REFUNDS and function(p, now)
    -- Best effort: give the tokens back, but never more than the bucket lacks from full.
    tb_load(p, now)
    if p.debt == 0 then return 0 end
    local units = math.min(p.cost, math.ceil(p.debt / p.window))
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
