import { clockedScript, LAST_ARG } from "../clock-slots";
import { foldConstants } from "./fold-constants";
import { RING_CODEC_LUA } from "./ring-codec.lua";
import { SLIDING_LOG_RING_LUA } from "./sliding-log-ring.lua";

/**
 * Reads a client's sliding log, either layout, without touching it (the admin "peek"): the same
 * arithmetic as the log scripts, but nothing is trimmed, added, converted or expired. Runs as EVAL_RO, so Redis
 * itself refuses it if it ever tried to write; `no-writes` also lets it run on a replica.
 *
 * KEYS[1]  the client's log (a ring or a sorted set: whichever the key holds is read)
 * ARGV[1]  limit, ARGV[2] window (ms), ARGV[3] cost to ask about, ARGV[4] the caller's clock
 *          in ms or "" for the Redis clock (TIME)
 *
 * Returns {allowed (0|1), remaining, reset, retryAfterMs, now}, as the sliding-log script would
 * for a request of `cost` at this instant. Cost: a ring is read as its script reads it (GET, or
 * GETRANGEs); a sorted set: TIME, ZCOUNT (O(log N)) and at most one ranged ZRANGEBYSCORE with LIMIT.
 */
export const PEEK_SCRIPT = foldConstants(`#!lua flags=no-writes,allow-key-locking
local ALG = {}
local GRACE = 0
local REFUNDS = false
${RING_CODEC_LUA}
${SLIDING_LOG_RING_LUA}
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
local count = redis.pcall('ZCOUNT', key, floor, '+inf')
if type(count) == 'table' then
  -- Not a sorted set: a ring, read exactly as the ring's own check and report would.
  local p = { key = key, limit = limit, window = window, cost = cost }
  local ring = ALG['sliding-log']
  ring.check(p, now)
  local remaining, reset, wait = ring.report(p, now, false)
  return {p.allowed and 1 or 0, remaining, reset, wait, now}
end
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
`);

// Its clock is ARGV[4], the last.
clockedScript(PEEK_SCRIPT, LAST_ARG);
