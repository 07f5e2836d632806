import { clockedScript, LAST_ARG } from "../clock-slots";
import { foldConstants } from "./fold-constants";
import { RING_CODEC_LUA } from "./ring-codec.lua";
import { SLIDING_LOG_RING_LUA } from "./sliding-log-ring.lua";

/**
 * Reads a client's sliding log without touching it (the admin "peek"): the same arithmetic as the
 * log script, but nothing is added, resized or expired. Runs as EVAL_RO, so Redis itself refuses
 * it if it ever tried to write; `no-writes` also lets it run on a replica.
 *
 * KEYS[1]  the client's log (a ring; a key of another type reads as an empty log)
 * ARGV[1]  limit, ARGV[2] window (ms), ARGV[3] cost to ask about, ARGV[4] the caller's clock
 *          in ms or "" for the Redis clock (TIME)
 *
 * Returns {allowed (0|1), remaining, reset, retryAfterMs, now}, as the sliding-log script would
 * for a request of `cost` at this instant. Cost: TIME, then the ring read as its script reads it
 * (GET, or GETRANGEs).
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

-- Read exactly as the ring's own check and report would.
local p = { key = key, limit = limit, window = window, cost = cost }
local ring = ALG['sliding-log']
ring.check(p, now)
local remaining, reset, wait = ring.report(p, now, false)
return {p.allowed and 1 or 0, remaining, reset, wait, now}
`);

// Its clock is ARGV[4], the last.
clockedScript(PEEK_SCRIPT, LAST_ARG);
