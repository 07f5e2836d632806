/**
 * Reads a client's sliding log without touching it (the admin "peek"): the same arithmetic as
 * the sliding-log script, but nothing is trimmed, added or expired. Runs as EVAL_RO, so Redis
 * itself refuses it if it ever tried to write; `no-writes` also lets it run on a replica.
 *
 * KEYS[1]  the client's sorted set
 * ARGV[1]  limit, ARGV[2] window (ms), ARGV[3] cost to ask about, ARGV[4] the caller's clock
 *          in ms or "" for the Redis clock (TIME)
 *
 * Returns {allowed (0|1), remaining, reset, retryAfterMs, now}, as the sliding-log script would
 * for a request of `cost` at this instant. Cost: TIME, ZCOUNT (O(log N)) and at most one ranged
 * ZRANGEBYSCORE with LIMIT (O(log N)).
 */
export const PEEK_SCRIPT = `#!lua flags=no-writes,allow-key-locking
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now
if ARGV[4] ~= nil and ARGV[4] ~= '' then
  now = tonumber(ARGV[4])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Live members: admitted at s with now < s + window (the writer trims s <= now - window).
local floor = '(' .. (now - window)
local count = redis.call('ZCOUNT', key, floor, '+inf')
local remaining = limit - count
if remaining < 0 then remaining = 0 end

local function nth(n)
  local found = redis.call('ZRANGEBYSCORE', key, floor, '+inf', 'WITHSCORES', 'LIMIT', n - 1, 1)
  return tonumber(found[2])
end

if count + cost <= limit then
  local reset = now + window
  if count > 0 then reset = nth(1) + window end
  return {1, remaining, reset, 0, now}
end
local need = count + cost - limit
if need > count then
  return {0, remaining, now + window, window, now}
end
local score = nth(need)
return {0, remaining, score + window, score + window - now, now}
`;
