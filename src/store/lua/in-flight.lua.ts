/**
 * The in-flight read (an admin look, GET /check/stats): one SCAN step over a concurrency
 * policy's sets, counting the live slots of each set it meets. Not a decision script: the keys
 * are found by the scan, so it declares none (and takes no key-locking flag).
 *
 * ARGV[1] the caller's clock in ms, or "" for the Redis clock
 * ARGV[2] the key pattern (the policy's sets)
 * ARGV[3] the SCAN cursor
 * ARGV[4] the SCAN COUNT
 * Returns {next cursor, sets met, live slots in them}. Commands: TIME, SCAN, ZCOUNT per set.
 */
import { CLOCK_LUA } from "./clock.lua";

export const IN_FLIGHT_LUA = `${CLOCK_LUA}local now = clock(ARGV[1])
local step = redis.call('SCAN', ARGV[3], 'MATCH', ARGV[2], 'COUNT', tonumber(ARGV[4]))
local sets, slots = 0, 0
for _, key in ipairs(step[2]) do
  local held = redis.call('ZCOUNT', key, '(' .. now, '+inf')
  if held > 0 then
    sets = sets + 1
    slots = slots + held
  end
end
return {step[1], sets, slots}
`;
