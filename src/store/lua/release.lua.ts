/**
 * The release script: concurrency slots given back when their requests end (concurrency.lua.ts
 * takes them).
 *
 * KEYS[1..n]  the slots' sorted sets
 * ARGV[1]     the caller's clock in ms, or "" for the Redis clock
 * ARGV[1 + i] slot i's member
 *
 * Returns one value per slot: 1 when it was held (live) and is now removed; 0 when it was not
 * there, or had lapsed (its timeout passed: the slot already counts for nothing, so its removal
 * releases nothing). Commands: TIME (unless the caller's clock), then per slot ZSCORE and, when
 * present, ZREM.
 */
import { CLOCK_LUA } from "./clock.lua";

export const RELEASE_LUA = `#!lua flags=allow-key-locking
${CLOCK_LUA}local now = clock(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local score = redis.call('ZSCORE', KEYS[i], ARGV[i + 1])
  out[i] = 0
  if score then
    redis.call('ZREM', KEYS[i], ARGV[i + 1])
    if tonumber(score) > now then out[i] = 1 end
  end
end
return out
`;
