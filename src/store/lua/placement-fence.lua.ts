/**
 * The placement fence (placement-fence.ts) as a Lua function: `fence(key, b, now)` with ARGV[b] == 'f' and the view after it
 * (fenceArgs); nil when the caller may go on, else the refusal reply {-3, code, at, endsBy}.
 * `placed` '' is an announce: the record is checked and written, no key is placed. Numbers of
 * the record are kept as the strings they came as (Lua's tostring turns 13-digit ms into
 * exponents).
 */
export const FENCE_LUA = `local function fence(key, b, now)
  local view, placed = ARGV[b + 1], ARGV[b + 2]
  local rec = redis.call('GET', key)
  local from, to, at, ends, closed
  if rec then from, to, at, ends, closed = string.match(rec, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.)$') end
  if view == 'r' then
    local cf, ct, cat, cends = ARGV[b + 3], ARGV[b + 4], ARGV[b + 5], ARGV[b + 6]
    if from ~= cf or to ~= ct then
      if rec and cf ~= to then return {-3, 5, tonumber(at), tonumber(ends)} end
      if rec and now < tonumber(ends) then return {-3, 3, tonumber(at), tonumber(ends)} end
      if now >= tonumber(cat) then return {-3, 4, tonumber(cat), tonumber(cends)} end
      redis.call('SET', key, cf .. '|' .. ct .. '|' .. cat .. '|' .. cends .. '|0')
      rec, from, to, at, ends, closed = true, cf, ct, cat, cends, '0'
    elseif at ~= cat then
      return {-3, 2, tonumber(at), tonumber(ends)}
    end
  end
  if not rec or placed == '' then return nil end
  if placed == to then
    if closed ~= '1' then redis.call('SET', key, from .. '|' .. to .. '|' .. at .. '|' .. ends .. '|1') end
    return nil
  end
  if placed == from then
    if closed ~= '1' and now < tonumber(at) then return nil end
    return {-3, 1, tonumber(at), tonumber(ends)}
  end
  return {-3, 5, tonumber(at), tonumber(ends)}
end
`;
