/**
 * The settle script: what a request reserved in its usage rules' weighted logs
 * (weighted-log.lua.ts) becomes what it used. One script of its own (no clock, no driver): it
 * touches only the entries of one admission.
 *
 * KEYS[1..n]  the weighted logs the request was admitted in
 * ARGV[1]     its member id (the entry's first field)
 * ARGV[2]     the units it used: an integer ≥ 0
 *
 * Each entry still in its log, not settled yet, takes the units (its log's sum moves by the
 * difference: more is charged even past the limit, less is given back) and is marked settled.
 * All or nothing: if any entry found is settled already, nothing is written. Returns
 * {status, then per log the units charged (negative: given back)}: status 1 settled, 2 already
 * settled, 0 unknown (no entry in any log: never admitted, refunded, or left every window).
 *
 * Why the entry keeps its admission's time: the units are the request's, charged where its
 * reservation was. The bound that gives (docs/usage.md "How exact"): take any rolling window
 * and the last admission k in it. When k was decided, the script summed every entry in the
 * window up to k as it stood then, each either settled (its final units) or not (its
 * reservation), and admitted k only if that sum plus k's reservation fit the limit. After
 * settles, the window holds the same entries with their final units. So:
 * - every reservation ≥ what its request uses: each entry's final units ≤ what k counted for it,
 *   and the window's usage ≤ the limit, in every rolling window;
 * - otherwise the window's usage exceeds the limit by at most Σ (used − reserved) over the
 *   entries not yet settled when k was admitted (k included): the requests in flight when the
 *   limit ran out, each beyond its reservation. A settle after its entry left the window changes
 *   no window a decision will read again.
 *
 * Redis commands: one GET and (unless unknown or already settled) one SET … KEEPTTL per log:
 * with one usage rule, EVALSHA + GET + SET. Two is not reachable: an exactly-once answer needs the
 * entry read, the charge needs the log written, and no Redis command does both on one entry.
 */
export const WEIGHTED_SETTLE_LUA = `#!lua flags=allow-key-locking
local member, units = ARGV[1], tonumber(ARGV[2])
if not units or units < 0 or units ~= math.floor(units) then
  return redis.error_reply('usage must be an integer >= 0')
end
local function num(x) return string.format('%.0f', x) end
local logs, found, already = {}, 0, false
for i = 1, #KEYS do
  local s = redis.call('GET', KEYS[i])
  local sum, n, pos = nil, nil, nil
  if s then sum, n, pos = string.match(s, '^W(%d+):(%d+);()') end
  local at = sum and string.find(s, ';' .. member .. ',', pos - 1, true)
  if at then
    local t, u, flag, nxt = string.match(s, '^;[^,;]*,(%d+),(%d+),([rs]);()', at)
    if t then
      found = found + 1
      if flag == 's' then already = true end
      logs[i] = { s = s, sum = tonumber(sum), n = n, pos = pos, at = at, t = t, u = tonumber(u),
        nxt = nxt }
    end
  end
end
local out = { 0 }
for i = 1, #KEYS do out[i + 1] = 0 end
if found == 0 then return out end
if already then
  out[1] = 2
  return out
end
out[1] = 1
for i = 1, #KEYS do
  local l = logs[i]
  if l then
    local delta = units - l.u
    local entry = ';' .. member .. ',' .. l.t .. ',' .. num(units) .. ',s;'
    redis.call('SET', KEYS[i], 'W' .. num(l.sum + delta) .. ':' .. l.n .. string.sub(l.s, l.pos - 1, l.at - 1) ..
      entry .. string.sub(l.s, l.nxt), 'KEEPTTL')
    out[i + 1] = delta
  end
end
return out
`;
