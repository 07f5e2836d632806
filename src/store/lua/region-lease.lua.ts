import { clockedScript, LAST_ARG } from "../clock-slots";
import { foldConstants } from "./fold-constants";
import { READ_HASH } from "./region-hash.lua";

/**
 * The scripts a region's own store runs for regional leases (docs/regions.md). Home keeps the
 * exact log; a region's store keeps, per client key, one hash of the leases home granted that
 * region, spent there in one near round trip.
 *
 * Every time in these scripts is the region's own `TIME`, and only ever compared with another
 * reading of the same clock: a lease is written with a *life* (ms), not an end in home's clock,
 * so an offset between the region's clock and home's cancels out (docs/regions.md, "Why it
 * stays exact"). That clock is read per hash through hash_now, which never lets it go back
 * (a clock stepped back would make every lease of the hash live longer by the step).
 *
 * The hash they keep per client key, and how its clock is read: region-hash.lua.ts.
 *
 * The spend, put and return scripts take one more ARGV, their last: "" for the region's TIME, or
 * the caller's ms on a region store that refuses TIME in scripts (store-clock.ts; the bound that
 * then holds is in docs/regions.md).
 */
/**
 * Spend: every key's cost from one live lease of that key, all or nothing.
 *
 * KEYS[i]   a key's hash                ARGV[1] n (keys)
 * ARGV per key (from 2, 7 each): cost, life (ms) of a lease of this key, limit, min units, the
 *           grant claim's length (ms), the life (ms) the units should have left: the lease
 *           with room that ends first among those with that much left is spent, else the one
 *           that ends last (0 for a request: its units are used now, the oldest go first; an
 *           isolate taking units for later wants them from a lease that outlives its own), and
 *           the request's policy (policyFingerprint): only a lease granted under it is spent, a
 *           live one granted under another ends now (the next put takes it out and returns its
 *           unspent units, as for any lease that ended), a denial held under another is ignored
 *
 * Returns per key {status, stamp, units left in that lease, remaining, resetAfterMs or
 * retryAfterMs, claim, "<memberId> <resetMark>" of that lease, ms that lease has left, now}:
 * `now` (this region's clock) is read before any grant the claim leads to is sent to home: the
 * put ends that lease at now + its spendable life, before its stamp (regional-leases.ts). status 1 spent, 0 no lease with room (decide at home), -1 denied here
 * (a denial home decided, still true); claim > 0: the caller is to ask home for that many units
 * (off the request path) and put them here. Nothing is spent unless every key could pay.
 * Commands: INFO (the server's run_id), TIME, then per key HGETALL and HSET (+ PEXPIRE for a new
 * hash; + HDEL and HSET when its clock stepped back or another server wrote it).
 */
export const REGION_SPEND_SCRIPT = foldConstants(`#!lua flags=allow-key-locking
local MAX_UNITS = 1000
${READ_HASH}
local time = clock_now()
local n = tonumber(ARGV[1])
local out, writes, all = {}, {}, true
for i = 1, n do
  local a = 1 + (i - 1) * 7
  local cost, life = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local limit, min_units, claim_ms = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local want_life, policy = tonumber(ARGV[a + 6]), ARGV[a + 7]
  local h, leases, now = read_hash(KEYS[i], time)
  local fresh = next(h) == nil
  -- The live lease with room that ends first among those with want_life left (spent first:
  -- the later one outlives it), else the one with room that ends last.
  local best, best_end, latest, latest_end, live_units, last_end = nil, 0, nil, 0, 0, 0
  local stale = {}
  for _, s in ipairs(leases) do
    local e = tonumber(h['e' .. s]) or 0
    local u = tonumber(h['u' .. s]) or 0
    -- Granted under another policy (or before leases named theirs): never spent by this one.
    if e > now and h['p' .. s] ~= policy then
      stale[#stale + 1] = s
    elseif e > now then
      live_units = live_units + u
      if e > last_end then last_end = e end
      if u >= cost then
        if e - now >= want_life and (best == nil or e < best_end) then best, best_end = s, e end
        if latest == nil or e > latest_end then latest, latest_end = s, e end
      end
    end
  end
  -- (Units taken for later from a lease about to end would end at once: none then.)
  if best == nil and (want_life == 0 or latest_end - now >= want_life / 2) then
    best, best_end = latest, latest_end
  end
  local status, retry = 0, 0
  if best then
    status = 1
  elseif h.x and h.xp == policy and now < tonumber(h.x) and cost >= tonumber(h.xc) then
    status, retry = -1, tonumber(h.x) - now
  else
    all = false
  end
  if status == -1 then all = false end
  -- Demand: units asked here since ds. Past one life, the count is scaled down to the last
  -- half life's share (a rate that decays instead of restarting from nothing).
  local d, ds = tonumber(h.d) or 0, tonumber(h.ds) or now
  if now - ds > life then
    d = math.floor(d * (life / 2) / (now - ds))
    ds = now - math.floor(life / 2)
  end
  d = d + cost
  -- Ask home for a lease when the key is warm here (min units asked within a life) and what is
  -- live would not last half a life at this rate, unless a grant is already in flight.
  local claim = 0
  -- What home last said remains under this policy, while it is younger than a life (capacity
  -- frees with time).
  local reported = limit
  if h.r and h.rp == policy then reported = tonumber(h.r) end
  local known = limit
  if h.r and h.rp == policy and now - (tonumber(h.rt) or 0) <= life then known = reported end
  local rate = d / math.max(now - ds, math.min(math.floor(life / 4), 1000), 1)
  -- (Claims only grow: a put answers the hash's live claim, and no other can equal it.)
  if status ~= -1 and d >= min_units and not (h.g and tonumber(h.g) > now)
      and now + claim_ms > math.abs(tonumber(h.g) or 0) then
    local spent_after = live_units - (status == 1 and cost or 0)
    if last_end - now < life / 2 or spent_after < rate * life / 2 then
      local k = math.ceil(1.5 * rate * life)
      local cap = math.floor(known / 4)
      if k > cap then k = cap end
      if k > MAX_UNITS then k = MAX_UNITS end
      if k >= min_units then claim = k end
    end
  end
  local remaining = reported + live_units - cost
  local reset_after = math.max(0, (tonumber(h.z) or now) - now)
  writes[i] = {best, cost, d, ds, claim, now + claim_ms, fresh, life, stale}
  out[i] = {status, best and tonumber(best) or 0, best and (tonumber(h['u' .. best]) - cost) or 0,
    remaining, status == -1 and retry or reset_after, claim, best and h['m' .. best] or '',
    best and (best_end - now) or 0, now}
end
for i = 1, n do
  local w = writes[i]
  local args = {'d', w[3], 'ds', w[4], 't', out[i][9]}
  if SERVER ~= '' then
    args[#args + 1] = 'i'
    args[#args + 1] = SERVER
  end
  if all and w[1] then
    args[#args + 1] = 'u' .. w[1]
    args[#args + 1] = out[i][3]
  end
  if w[5] > 0 then
    args[#args + 1] = 'g'
    args[#args + 1] = w[6]
  end
  -- A stale lease ends now, whether or not this request is paid (ending early is always safe).
  for _, s in ipairs(w[9]) do
    args[#args + 1] = 'e' .. s
    args[#args + 1] = out[i][9]
  end
  if not all then out[i][1] = (out[i][1] == -1) and -1 or 0 end
  redis.call('HSET', KEYS[i], unpack(args))
  if w[7] then redis.call('PEXPIRE', KEYS[i], w[8] * 2) end
end
return out
`);

/**
 * Put: what home answered a claim, written into the region. A lease (units > 0) gets its life
 * from now on the region's clock; a denial (deny > 0) holds for that many ms for a cost of
 * `denyCost` or more; either way the claim is released. Every lease of the key that has ended,
 * and with a new lease every one ending within half its life (the one it renews), is taken out
 * whole and returned, for the caller to give its unspent units back to home: taken out
 * atomically, none of them can be spent after.
 *
 * KEYS[1] the key's hash
 * ARGV: stamp, units, end (this region's clock, exclusive), "<memberId> <resetMark>", home
 *       remaining (-1: unknown), home resetAfterMs,
 *       deny (ms, 0 for none), denyCost, key ttl (ms), the claim it answers (the `g` its
 *       spend set; it is released only if still that one), the policy home decided under
 *       (policyFingerprint): the lease's `p`, the denial's `xp`, the remaining's `rp`, and the
 *       clock ("" for TIME)
 * A lease whose end has passed is refused, and so is one whose claim is no longer the hash's
 * (a forget or a step back of the clock ended it); one already written is not written again (a
 * put that ran twice must not bring spent units back).
 * Returns {refused (1: the lease was not written, its units go back to home), {stamp, units,
 * "<memberId> <resetMark>", …} of every lease taken out}.
 * Commands: INFO, TIME, HGETALL, HSET, HDEL (when any is taken out), PTTL, PEXPIRE (when it
 * grows); + HDEL and HSET when the hash's clock stepped back or another server wrote it.
 */
export const REGION_PUT_SCRIPT = foldConstants(`#!lua flags=allow-key-locking
${READ_HASH}
local key = KEYS[1]
local stamp, units, ends = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local h, leases, now = read_hash(key, clock_now())
local taken, gone = {}, {}
local args = {'t', now}
-- Release the claim this put answers, not a newer one (a late put must not clear it); its
-- value stays, negated, for the next claim to exceed.
if h.g == ARGV[10] then args = {'t', now, 'g', '-' .. h.g} end
if SERVER ~= '' then
  args[#args + 1] = 'i'
  args[#args + 1] = SERVER
end
-- A lease already written (a put that ran twice) is not written again; one whose end has
-- passed is refused, and so is one that does not answer the hash's live claim: that claim
-- was ended by a forget (a reset at home, which may have come after the grant) or by a step
-- back of the clock, or it expired and another was made. The caller gives its units back.
local refused = 0
if units > 0 and (h['e' .. stamp] ~= nil or ends <= now or h.g ~= ARGV[10]) then
  if h['e' .. stamp] == nil then refused = 1 end
  units = 0
end
local life = math.max(0, ends - now)
-- Taken out: every lease that has ended, and with a new lease, any ending within half its life.
local horizon = now
if units > 0 then horizon = now + life / 2 end
for _, s in ipairs(leases) do
  if s ~= stamp and (tonumber(h['e' .. s]) or 0) <= horizon then
    local u = tonumber(h['u' .. s]) or 0
    if u > 0 then
      taken[#taken + 1] = tonumber(s)
      taken[#taken + 1] = u
      taken[#taken + 1] = h['m' .. s] or ''
    end
    gone[#gone + 1] = 'u' .. s
    gone[#gone + 1] = 'e' .. s
    gone[#gone + 1] = 'm' .. s
    gone[#gone + 1] = 'p' .. s
  end
end
if units > 0 then
  for _, v in ipairs({'u' .. stamp, units, 'e' .. stamp, ends, 'm' .. stamp, ARGV[4],
      'p' .. stamp, ARGV[11], 'z', now + tonumber(ARGV[6])}) do
    args[#args + 1] = v
  end
end
-- Home's remaining as of now (-1: home did not say), for sizing the next leases.
if tonumber(ARGV[5]) >= 0 then
  for _, v in ipairs({'r', ARGV[5], 'rt', now, 'rp', ARGV[11]}) do args[#args + 1] = v end
end
local deny = tonumber(ARGV[7])
if deny > 0 then
  for _, v in ipairs({'x', now + deny, 'xc', ARGV[8], 'xp', ARGV[11]}) do args[#args + 1] = v end
end
if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
redis.call('HSET', key, unpack(args))
local ttl = tonumber(ARGV[9])
if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
return {refused, taken}
`);

/**
 * Forget: a reset of the key at home reaches the region too: its leases (their units were in the
 * log the reset deleted), its claim and a held denial go. What stays is a mark: the hash's clock
 * (t, o), moved on 1 ms so that every time read after the forget is later than every time read
 * before it, and its claim as -g, which every later claim exceeds. A put answering a claim made
 * before the forget (its grant may have reached home before the reset) then finds another claim
 * or none, and is refused, for as long as the mark lives (ARGV[1] ms: longer than any lease) and
 * after, when the hash is gone and holds no claim at all.
 * KEYS[1] the key's hash; ARGV[2] the clock ("" for TIME). Returns 1 if it existed. Commands: HMGET, UNLINK, and when it
 * existed TIME, HSET, PEXPIRE.
 */
export const REGION_FORGET_SCRIPT = `#!lua flags=allow-key-locking
local key = KEYS[1]
local f = redis.call('HMGET', key, 't', 'o', 'g')
if redis.call('UNLINK', key) == 0 then return 0 end
local time = tonumber(ARGV[2])
if ARGV[2] == nil or ARGV[2] == '' then
  local t = redis.call('TIME')
  time = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local now = math.max(time + (tonumber(f[2]) or 0), tonumber(f[1]) or 0) + 1
local mark = {'t', now, 'o', now - time}
if f[3] then
  mark[#mark + 1] = 'g'
  mark[#mark + 1] = -math.abs(tonumber(f[3]) or 0)
end
redis.call('HSET', key, unpack(mark))
redis.call('PEXPIRE', key, ARGV[1])
return 1
`;

/**
 * Return: units of a request a regional lease paid for, back into that lease while it lives.
 *
 * KEYS[1] the key's hash      ARGV[1] the lease's stamp, ARGV[2] units
 * Returns 1 when they went back into the lease, 0 when it has ended, or when the hash's clock
 * stepped back or another server wrote it (hash_now: the next spend or put ends its leases): the
 * caller gives them back to home, by the stamp. Commands: HMGET, (INFO when the hash names its
 * server,) TIME, HSET.
 */
export const REGION_RETURN_SCRIPT = `#!lua flags=allow-key-locking
local f = redis.call('HMGET', KEYS[1], 'e' .. ARGV[1], 'u' .. ARGV[1], 't', 'o', 'i')
-- A hash another server wrote (a restored or replicated copy: hash_now) holds no live lease.
if f[5] then
  local info = redis.pcall('INFO', 'server')
  local server = type(info) == 'string' and string.match(info, 'run_id:(%w+)') or ''
  if server ~= '' and server ~= f[5] then return 0 end
end
local time = tonumber(ARGV[3])
if ARGV[3] == nil or ARGV[3] == '' then
  local t = redis.call('TIME')
  time = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local now = time + (tonumber(f[4]) or 0)
local mark = tonumber(f[3]) or now
if now < mark or (tonumber(f[1]) or 0) <= now then return 0 end
redis.call('HSET', KEYS[1], 'u' .. ARGV[1], (tonumber(f[2]) or 0) + tonumber(ARGV[2]), 't', now)
return 1
`;

// Their clock is their last ARGV (the runner passes the caller's there: clock-slots.ts).
for (const script of [
  REGION_SPEND_SCRIPT,
  REGION_PUT_SCRIPT,
  REGION_RETURN_SCRIPT,
  REGION_FORGET_SCRIPT,
]) {
  clockedScript(script, LAST_ARG);
}
