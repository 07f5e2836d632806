/**
 * The hash a region's own store keeps per client key for regional leases (docs/regions.md), and
 * the Lua that reads it on the hash's own clock (READ_HASH: composed into the scripts of
 * region-lease.lua.ts).
 *
 * The hash, per client key:
 *   u<s>  units left of the lease stamped s (home clock)     e<s>  its end (region clock, exclusive)
 *   m<s>  "<memberId> <resetMark>" (what a give-back to home carries)
 *   p<s>  the policy it was granted under (lease.ts policyFingerprint): spent only by a request
 *         of that policy; a request of another ends it (its end set to now)
 *   d, ds demand (units asked here) since ds (region clock): sizes and warms the next lease
 *   g     a grant is in flight until g (region clock): one caller asks home at a time
 *   x, xc denied until x (region clock) for a cost of xc or more: a denial home decided
 *   xp    the policy that denial was decided under: it denies only a request of that policy
 *   r, rt home's last remaining and when it said so (region clock): sizes the next lease
 *   rp    the policy that remaining was reported under (another's sizes from the limit)
 *   z     when capacity next frees (region clock), for the headers
 *   t, o  the hash's clock: t the latest time any script read for it, o ms added to TIME
 *         (hash_now). A claim released or ended is kept as -g: a later claim must be larger.
 *   i     the server that last wrote it (`INFO server`'s run_id): a hash read by another server
 *         is an older copy of the data (a restart from a snapshot, a failover to a replica
 *         behind its primary), whose leases may show units already spent: they end (hash_now)
 */
export const READ_HASH = `
local function clock_now()
  local arg = ARGV[#ARGV]
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The hash's clock: TIME plus the hash's offset o, never below t, the latest time a script
-- read for this hash. Below it, the region's clock stepped back (NTP, a failover to a server
-- whose clock is behind) by more than the time since: how far, and so how long the hash's
-- leases have really lived, is unknown. Every lease of the hash then ends (its units lapse:
-- held capacity, never an admission), with its claim (the put answering it is refused) and a
-- held denial (its end is as unknown), and o moves the clock on to just past t: a time read
-- after the step is later than every time read before it, and a lease granted after it lives
-- its life on a clock that advances with real time again. (A step back shorter than the time
-- since the hash was last read goes unseen: docs/regions.md bounds it.) The caller writes t.
-- The same for a hash another server read last (its i is not this server's run_id): this data
-- is a copy, restored or replicated, that may be older than the last writes the region made
-- (spends among them), so its leases may show units already spent; they end as for a step
-- back. A server whose INFO is refused (or names no run_id) checks nothing (docs/regions.md).
local function server_id()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then return '' end
  return string.match(info, 'run_id:(%w+)') or ''
end
local SERVER = server_id()
local function hash_now(key, h, leases, time)
  local now = time + (tonumber(h.o) or 0)
  local mark = tonumber(h.t)
  local moved = SERVER ~= '' and h.i ~= nil and h.i ~= SERVER
  if not moved and (mark == nil or now >= mark) then return now, leases end
  if mark ~= nil and now < mark then now = mark + 1 end
  local gone = {'x', 'xc'}
  for _, s in ipairs(leases) do
    for _, f in ipairs({'u' .. s, 'e' .. s, 'm' .. s, 'p' .. s}) do gone[#gone + 1] = f end
  end
  for _, f in ipairs(gone) do h[f] = nil end
  redis.call('HDEL', key, unpack(gone))
  local set = {'o', now - time, 't', now}
  if moved then
    h.i = SERVER
    set[#set + 1] = 'i'
    set[#set + 1] = SERVER
  end
  if h.g and tonumber(h.g) > 0 then
    h.g = '-' .. h.g
    set[#set + 1] = 'g'
    set[#set + 1] = h.g
  end
  redis.call('HSET', key, unpack(set))
  return now, {}
end
-- The hash, its leases' stamps and its clock's now (hash_now) at \`time\` (clock_now).
local function read_hash(key, time)
  local flat = redis.call('HGETALL', key)
  local h, leases = {}, {}
  for i = 1, #flat, 2 do
    local f, v = flat[i], flat[i + 1]
    h[f] = v
    if string.byte(f, 1) == 117 then leases[#leases + 1] = string.sub(f, 2) end
  end
  local now
  now, leases = hash_now(key, h, leases, time)
  return h, leases, now
end
`;
