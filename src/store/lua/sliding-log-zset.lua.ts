/**
 * The exact sliding-window log in a sorted set (`sliding-log-zset`, the seeds' design; the default
 * `sliding-log` keeps the same log in a ring: sliding-log-ring.lua.ts), as a fragment of the composed scripts (see scripts.ts for the
 * interface every algorithm implements).
 *
 * Key: a sorted set; one member per admitted unit of cost, `<member id>.<n>`, scored by admission
 * time. Member ids are unique per call (isolate id + counter), never the timestamp alone, or
 * requests sharing a millisecond would collapse into one member. Because members belong to a
 * request, a refund is exact: ZREM exactly those members.
 *
 * Redis commands: check = ZREMRANGEBYSCORE, ZCARD; commit = ZADD (one per 500 units of cost),
 * PEXPIRE; report = ZRANGE (unless the log held nothing before). Allowed: 5 (4 on an empty log);
 * denied: 3. A denial writes nothing but the trim of members that have already left the window.
 * Refund: ZREM (one per 500 units).
 * Memory: one member per admitted unit in the window (see docs/algorithms.md).
 */
export const SLIDING_LOG_ZSET_LUA = `
-- ZADD n members \`<prefix>.<i>\`, scored times[i] (or score), in chunks: unpack() of more than a
-- few thousand values overflows Lua's C stack.
local function zaddMany(key, n, prefix, score, times)
  local args = {}
  for i = 1, n do
    args[#args + 1] = times and times[i] or score
    args[#args + 1] = prefix .. '.' .. i
    if #args >= 1000 then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if #args > 0 then redis.call('ZADD', key, unpack(args)) end
end

ALG['sliding-log-zset'] = {
  check = function(p, now)
    -- A member admitted at s is inside the window while now < s + window.
    local trimmed = redis.pcall('ZREMRANGEBYSCORE', p.key, '-inf', now - p.window)
    if type(trimmed) == 'table' and trimmed.err then
      -- A ring (the rule's algorithm changed). If its live times fit this limit they become
      -- members (nothing admitted in the window is forgotten: never a burst past the limit). If
      -- they do not, this call is denied on them and nothing is written: a sorted set of the
      -- limit would drop the oldest, which another version of the rule with a higher limit (a
      -- deploy, a /check caller's limit) still counts; memory stays the ring's.
      local s = redis.call('GET', p.key)
      if codec().isRing(s) then
        local times = codec().ringTimes(s, now - p.window)
        if #times > p.limit then
          p.count, p.allowed, p.ringTimes = #times, false, times
          return
        end
        redis.call('DEL', p.key)
        zaddMany(p.key, #times, 'ring', 0, times)
        if #times > 0 then redis.call('PEXPIRE', p.key, p.window + GRACE + STAMP_AHEAD_MAX) end
      else
        redis.call('DEL', p.key)
      end
    end
    p.count = redis.call('ZCARD', p.key)
    p.allowed = p.count + p.cost <= p.limit
  end,
  commit = function(p, now)
    zaddMany(p.key, p.cost, p.member, p.stamp)
    p.count = p.count + p.cost
    -- Every member has left the window \`window\` ms after the newest (plus GRACE on the caller's
    -- clock).
    -- A lease's members are stamped up to STAMP_AHEAD_MAX in the future, and a later admission's
    -- PEXPIRE must not cut them short: the TTL always covers that much more.
    redis.call('PEXPIRE', p.key, p.window + GRACE + STAMP_AHEAD_MAX)
  end,
  report = function(p, now, committed)
    -- More members than the limit (the limit was lowered, or another version of the rule with a
    -- higher limit shares this log during a deploy) leave 0, not fewer; the wait below is still
    -- exact and within the window (only members inside it are left).
    local remaining = math.max(0, p.limit - p.count)
    if p.allowed then
      if p.count == 0 then return remaining, now, 0 end
      -- The log held only this request's members: the oldest is now, no ZRANGE needed (the
      -- first request of every window saves a billed command).
      if committed and p.count == p.cost then return remaining, p.stamp + p.window, 0 end
      local oldest = tonumber(redis.call('ZRANGE', p.key, 0, 0, 'WITHSCORES')[2])
      return remaining, oldest + p.window, 0
    end
    -- Denied: this cost fits when the (count + cost - limit)-th oldest member leaves. Only time
    -- frees capacity in a log (others can only consume), so this instant is exact.
    local need = p.count + p.cost - p.limit
    if need > p.count then
      -- cost > limit never fits; callers validate this, but never return garbage.
      return remaining, now + p.window, p.window
    end
    -- A ring's times when the check decided on them (sorted, oldest first), else the members.
    local score = p.ringTimes and p.ringTimes[need]
      or tonumber(redis.call('ZRANGE', p.key, need - 1, need - 1, 'WITHSCORES')[2])
    return remaining, score + p.window, score + p.window - now
  end,
  refund = REFUNDS and function(p, now)
    local removed, args = 0, {}
    for i = 1, p.cost do
      args[#args + 1] = p.member .. '.' .. i
      if #args >= 500 then
        removed = removed + redis.call('ZREM', p.key, unpack(args))
        args = {}
      end
    end
    if #args > 0 then removed = removed + redis.call('ZREM', p.key, unpack(args)) end
    return removed
  end,
}
`;
