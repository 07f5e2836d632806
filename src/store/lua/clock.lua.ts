/**
 * The scripts' clock, as a fragment: the caller's ms when an argument gives it, else the Redis
 * clock (TIME) in ms. The composed scripts (scripts.ts) and the plans scripts (plans.ts) share it.
 */
export const CLOCK_LUA = `local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;
