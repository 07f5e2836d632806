/**
 * The exact sliding-window log, as one atomic Lua script.
 *
 * KEYS[1]  the client's sorted set: one member per admitted unit of cost, scored by admission time.
 * ARGV[1]  limit (units per window)
 * ARGV[2]  window in ms
 * ARGV[3]  cost (units this request takes; 1 ≤ cost ≤ limit)
 * ARGV[4]  a member prefix unique to this call (isolate id + counter): members must be unique,
 *          never the timestamp alone, or requests sharing a millisecond collapse into one.
 * ARGV[5]  the caller's clock in ms, or "" to use the Redis clock (TIME): one clock for every
 *          isolate in every location.
 *
 * Returns {allowed (0|1), remaining, reset (ms: when capacity next frees), retryAfterMs, now}.
 *
 * Commands per call: allowed = TIME, ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE (+ ZRANGE unless the
 * set was empty); denied = TIME, ZREMRANGEBYSCORE, ZCARD, ZRANGE. A denial writes nothing but the
 * trim of members that have already left the window.
 *
 * The shebang lets Upstash run scripts on different keys in parallel (every key is in KEYS);
 * the local bridge strips the flag for stock Redis.
 */
export const SLIDING_LOG_SCRIPT = `#!lua flags=allow-key-locking
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local now
if ARGV[5] ~= nil and ARGV[5] ~= '' then
  now = tonumber(ARGV[5])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A member admitted at s is inside the window while now < s + window.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)

if count + cost <= limit then
  local oldest = now
  if count > 0 then
    oldest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  end
  -- ZADD in chunks: unpack() of more than a few thousand values overflows Lua's C stack.
  local args = {}
  for i = 1, cost do
    args[#args + 1] = now
    args[#args + 1] = ARGV[4] .. '.' .. i
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', key, unpack(args))
  end
  -- Every member has left the window \`window\` ms after the newest: the key's TTL is exact.
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - cost, oldest + window, 0, now}
end

-- Denied: nothing is added. Capacity for this cost frees when the (count + cost - limit)-th
-- oldest member leaves; only time frees capacity in a log, so this instant is exact.
local need = count + cost - limit
if need > count then
  -- cost > limit can never fit; callers validate this, but never return garbage.
  return {0, limit - count, now + window, window, now}
end
local score = tonumber(redis.call('ZRANGE', key, need - 1, need - 1, 'WITHSCORES')[2])
return {0, limit - count, score + window, score + window - now, now}
`;
