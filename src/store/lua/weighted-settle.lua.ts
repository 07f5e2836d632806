import { foldConstants } from "./fold-constants";
import { WL_CODEC } from "./weighted-log.lua";

/**
 * The settle script: what a request reserved in its usage rules' weighted logs
 * (weighted-log.lua.ts) becomes what it used. One script of its own (no clock, no driver): it
 * touches only the entries of one admission.
 *
 * KEYS[1..n]  the weighted logs the request was admitted in
 * ARGV[1]     its member id (the entry's first field)
 * ARGV[2..]   the units it used, per log (rules may read their usage differently): integers ≥ 0
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
 * Redis commands: per log one GETRANGE of its newest 8 kB (more, back in ranges that double, for
 * an entry older than those) and (unless unknown or already settled) one SETRANGE of the entry and
 * what was admitted after it: with one usage rule, EVALSHA + GETRANGE + SETRANGE. Two is not
 * reachable: an exactly-once answer needs the entry read, the charge needs the log written, and
 * no Redis command does both on one entry.
 */
export const WEIGHTED_SETTLE_LUA = foldConstants(`#!lua flags=allow-key-locking
${WL_CODEC}
local member, used = ARGV[1], {}
for i = 1, #KEYS do
  local units = tonumber(ARGV[i + 1])
  if not units or units < 0 or units ~= math.floor(units) then
    return redis.error_reply('usage must be an integer >= 0')
  end
  used[i] = units
end
local logs, found, already = {}, 0, false
for i = 1, #KEYS do
  local v = wl_open(KEYS[i], true)
  local at, t, u, state, nxt = wl_find(v, member)
  if at and state ~= 'x' then
    found = found + 1
    if state == 's' then already = true end
    logs[i] = { v = v, at = at, t = t, u = u, nxt = nxt }
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
    local delta = used[i] - l.u
    wl_rewrite(l.v, l.at, l.nxt, wl_entry(member, l.t, used[i], 's'), l.v.sum + delta)
    out[i + 1] = delta
  end
end
return out
`);
