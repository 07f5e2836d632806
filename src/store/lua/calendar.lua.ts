/**
 * Calendar quotas: `limit` units per day, week or month in a timezone (limiter/calendar-period.ts),
 * as a fragment of the composed scripts (see scripts.ts).
 *
 * Lua cannot read a timezone, so the caller sends the starts of consecutive periods around its
 * own clock in the window's place (script-inputs.ts: "<s0>:<s1>:…|<anchor>", ascending; the
 * anchor is for a key's own, calendar-plans.lua.ts), and the script
 * counts in the one that holds the store's `now`: every isolate in every location shares one
 * clock and so one period, as with the other algorithms. An isolate whose clock is so far off
 * that no period sent holds `now` gets a script error (its rule's failure policy), never a count
 * in the wrong period.
 *
 * Key: a string `<start>:<t>:<count>`: `count` units admitted in the period starting at `start`,
 * the last at `t`. The period lives in the value, not in the key name, for the reason
 * fixed-window gives: with the Redis clock it is only known inside the script, and every key a
 * script touches is in KEYS. A value of another period is read as fixed-window reads another
 * window: a later one of the periods sent (a faster isolate on the caller's clock, across a
 * boundary) is counted in, never overwritten; units admitted since this period started (`t` ≥
 * its start: the anchor or timezone changed mid-period, or the other version of a rolling deploy
 * wrote it) count here, so a change never hands out a fresh budget mid-period; an earlier period
 * counts for nothing. TTL: the
 * period's end plus CAL_MARGIN (and GRACE on the caller's clock), so a refund arriving just after
 * the boundary still finds its period.
 *
 * After a reset the count is reborn stamped, as fixed-window's (count-stamp.lua.ts): a refund or a
 * settle of a request admitted before that birth finds nothing to give back or charge.
 *
 * Redis commands: as fixed-window. check = GET; commit = SET … PX. Allowed: 2; denied: 1. Refund:
 * GET, SET KEEPTTL, only while the stored period is the one the request was counted in; a usage
 * rule's settle (settle-driver.lua.ts) the same, with a signed amount, while that period runs.
 * Counts are written with int() (scripts.ts): a usage rule's limit is up to 10^12 units.
 */
export const CALENDAR_LUA = `
local CAL_MARGIN = 60000

-- The period of the starts sent that holds \`at\`: start, end; nil when none does.
local function cal_period(p, at)
  local b = p.bounds
  for i = 1, #b - 1 do
    if at >= b[i] and at < b[i + 1] then return b[i], b[i + 1] end
  end
  return nil
end

-- A stored value: start, last admission, count, birth stamp (count-stamp.lua.ts) or nil.
local function cal_parse(value)
  local s, t, count, born = string.match(value, '^(%-?%d+):(%-?%d+):(%d+)(.*)$')
  if not s or (born ~= '' and not string.match(born, STAMPED)) then return nil end
  return s, t, count, born ~= '' and born or nil
end

-- p.start, p.ends: the period counted in; p.own: the value is that period's (refundable); p.born:
-- its birth stamp, kept by every write of it.
local function cal_load(p, now, adopt)
  local start, ends = cal_period(p, now)
  if not start then
    error({err = 'calendar period: the store clock (' .. now .. ') is outside the periods sent'})
  end
  p.start, p.ends = start, ends
  p.count, p.own, p.t, p.born = 0, false, nil, nil
  local value = redis.call('GET', p.key)
  if not value then return end
  if value == RESET_TOMBSTONE then
    if adopt then p.born = ':' .. int(now) .. ':' .. p.member end
    return
  end
  local s, t, count, born = cal_parse(value)
  if not s then return end
  s, t, count = tonumber(s), tonumber(t), tonumber(count)
  if s == start then
    p.count, p.own, p.t, p.born = count, true, t, born
  elseif adopt and s > start and cal_period(p, s) == s then
    -- A later period of these (only a faster caller clock can have written it): count there
    -- too, and never write this older one over it.
    local _, ends = cal_period(p, s)
    p.start, p.ends, p.count, p.own, p.t, p.born = s, ends, count, true, t, born
  elseif adopt and t >= start then
    p.count = count
  end
end

-- Whether the stored value is the period the request was counted in (p.at's), and a count that
-- held the request (born before it, count-stamp.lua.ts): that period's end, the value read into
-- p.s, p.t, p.count, p.born; nil when it is not.
local function cal_own(p)
  local start, ends = cal_period(p, p.at)
  if not start then return nil end
  local value = redis.call('GET', p.key)
  if not value then return nil end
  local s, t, count, born = cal_parse(value)
  if not s or tonumber(s) ~= start then return nil end
  if born and not held_since(born, p) then return nil end
  p.s, p.t, p.count, p.born = s, t, tonumber(count), born
  return ends
end

-- Gives back \`units\` of the period's count read by cal_own, never below zero; negative units
-- are charged whatever the count. Returns what it gave back (KEEPTTL: the period's end).
local function cal_give(p, units)
  if units > p.count then units = p.count end
  if units == 0 then return 0 end
  redis.call('SET', p.key,
    p.s .. ':' .. p.t .. ':' .. int(p.count - units) .. (p.born or ''), 'KEEPTTL')
  return units
end

ALG['calendar'] = {
  -- The window sent: "<s0>:<s1>:…|<anchor>" → the starts, and the longest period between them.
  bounds = function(arg)
    local bounds, window = {}, 0
    for s in string.gmatch(string.match(arg, '^[^|]*'), '[^:]+') do
      bounds[#bounds + 1] = tonumber(s)
    end
    if #bounds < 2 then return nil, nil end
    for j = 2, #bounds do window = math.max(window, bounds[j] - bounds[j - 1]) end
    return bounds, window
  end,
  check = function(p, now)
    cal_load(p, now, true)
    p.allowed = p.count + p.cost <= p.limit
  end,
  commit = function(p, now)
    p.count = p.count + p.cost
    local t = math.max(now, p.t or now, p.start)
    redis.call('SET', p.key, p.start .. ':' .. t .. ':' .. int(p.count) .. (p.born or ''), 'PX',
      p.ends - now + CAL_MARGIN + GRACE)
  end,
  report = function(p, now, committed)
    -- Everything frees when the next period starts; cost <= limit, so a denied cost fits then.
    local remaining = math.max(0, p.limit - p.count)
    if p.allowed then return remaining, p.ends, 0 end
    return remaining, p.ends, p.ends - now
  end,
  -- A limit below the cost (a key's override): no period admits it, and the answer still names
  -- the next period's start, as every denial here does.
  overReset = function(p, now)
    local _, ends = cal_period(p, now)
    if not ends then return now + p.window, p.window end
    return ends, ends - now
  end,
  refund = REFUNDS and function(p, now)
    -- The units come off the period the request was counted in (p.at), if it is still the stored
    -- one; a refund after the next period began gives back nothing (that budget is fresh).
    if not cal_own(p) then return 0 end
    return cal_give(p, p.cost)
  end,
  -- A usage rule's settle (settle-driver.lua.ts): the period the request was counted in, still
  -- the stored one and still running at now: its end, else nil (nothing to charge).
  settleFind = REFUNDS and function(p, now)
    local ends = cal_own(p)
    if ends and now < ends then return ends end
    return nil
  end,
  -- What the request used in its reservation's place: less given back (never below zero), more
  -- charged whatever the count (the request already happened). Returns the charge.
  settleWrite = REFUNDS and function(p, used)
    return -cal_give(p, p.cost - used)
  end,
}
`;
