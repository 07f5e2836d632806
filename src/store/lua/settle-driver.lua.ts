/**
 * The settle script's driver, composed in scripts.ts with the fragments of the algorithms a
 * usage rule counts in (the prelude's `policies` and `clock` are in scope).
 */
import { MAX_SETTLE_AGE_MS, MAX_WEIGHTED_ENTRIES } from "../caps";

/**
 * What one admitted request reserved in its usage rules becomes what it used, once.
 *
 * KEYS[1..n]  the usage policies' keys the request was admitted in; KEYS[n + 1] its once-gate
 *             (keys.ts settleGateKey) when any policy is not the weighted log
 * ARGV[1]     the caller's clock in ms, or "" (read only for a fixed window or a period)
 * ARGV[2]     the request's member id
 * ARGV[3]     n
 * ARGV[4]     "0"
 * ARGV[5]     the store's `now` of the admission: the window or period it was counted in
 * ARGV[6..]   per policy: algorithm, limit, window ms (a period: its starts), cost (the
 *             reservation), as evaluated
 * ARGV[6 + 4n..] per policy, the units it used (rules may read their usage differently):
 *             integers ≥ 0
 * ARGV[6 + 5n..] per policy, where the admission put its weighted-log entry (the evaluate
 *             reply's offset), or -1: unknown (a receipt from before offsets; not a log)
 *
 * Per policy, found: the weighted log's entry still in its log (sliding-log-weighted's
 * settleFind: with an offset it settles it there and then, as the rest of this call would, and
 * takes it back, settleUndo, when the call ends in 2 or a gate taken: nothing written, as
 * below); a fixed window's or a period's count, still the one the request was counted in
 * and still running at now (and now within MAX_SETTLE_AGE_MS of the admission). Then, all or
 * nothing: nothing found → status 0 (unknown: never admitted, refunded, or out of its windows
 * and periods), nothing written; an entry settled already, or the once-gate already taken
 * (SET … NX PX: it lives until the last found window or period ends, at most MAX_SETTLE_AGE_MS
 * after the admission, when no settle finds anything any more) → 2, nothing written; else 1,
 * and each found policy takes the units used in the reservation's place: less is given back
 * (a count never below zero), more charged even past the limit (the request already happened).
 * Returns {status, then per policy the units charged (negative: given back)}.
 *
 * The bound (docs/usage.md "How exact"). A weighted log: take any rolling window and the last
 * admission k in it. A fixed window or a period: that window, and the last admission k counted
 * in it. When k was decided, the script summed every admission counted there before k as it
 * stood then, each either settled (its units used) or not (its reservation), and admitted k only
 * if that sum plus k's reservation fit the limit. A settle changes only its own request's units,
 * and only where that request was counted, so in the end that window holds the same admissions
 * with their final units (a settle that came too late leaves the reservation). So:
 * - every reservation ≥ what its request uses: each final units ≤ what k counted for it, and the
 *   units charged in the window ≤ the limit;
 * - otherwise they exceed the limit by at most Σ (used − reserved) over the admissions not yet
 *   settled when k was admitted (k included): the requests in flight when the limit ran out,
 *   each beyond its reservation.
 * A settle of a window or period that has ended changes nothing a decision reads again, so it
 * charges nothing (its budget is the next one's).
 *
 * Redis commands: per weighted log one BITFIELD when the receipt names its entry's offset and
 * the entry is still there, one more to take it back (settled before: 409; another policy's
 * refusal), else GETRANGE + BITFIELD (weighted-settle.lua.ts lists the rare paths); with a fixed
 * window or a period, TIME (the Redis clock only) + SET NX (the gate) + per policy GET + SET
 * KEEPTTL. One weighted log: EVALSHA + BITFIELD (2; again, 3). One calendar usage rule: EVALSHA
 * + TIME + GET + SET NX + SET (5; 4 on the caller's clock).
 */
export const SETTLE_DRIVER = `
local SETTLE_AGE_MAX = ${MAX_SETTLE_AGE_MS}
local n, at, used = tonumber(ARGV[3]), tonumber(ARGV[5]), {}
for i = 1, n do
  local units = tonumber(ARGV[5 + 4 * n + i])
  if not units or units < 0 or units ~= math.floor(units) then
    return redis.error_reply('usage must be an integer >= 0')
  end
  used[i] = units
end
local ps, err = policies(n, 5, ARGV[2], at)
if not ps then return redis.error_reply(err) end
local out, found, any, already, now, gateEnds = { 0 }, {}, false, false, nil, nil
-- Past the log's longest: an offset no admission wrote (a BITFIELD there would grow the string).
local offMax = ${MAX_WEIGHTED_ENTRIES * 160}
-- The counts first (the clock, their reads), the logs after: a log's fast path writes as it
-- finds, and an error raised after a write (TIME refused) would leave it written (Redis does not
-- undo a script's writes), its retry answered 409 and the counts never settled.
for pass = 1, 2 do
  for i = 1, n do
    local p = ps[i]
    if pass == 1 and not p.alg.settleGated then
      out[i + 1] = 0
      if now == nil then now = clock(ARGV[1]) end
      -- Too late to settle: its gate may be gone, and the reservation stands.
      local ends = now < at + SETTLE_AGE_MAX and p.alg.settleFind(p, now)
      if ends then
        found[i] = true
        if gateEnds == nil or ends > gateEnds then gateEnds = ends end
      end
    elseif pass == 2 and p.alg.settleGated then
      out[i + 1] = 0
      local off = tonumber(ARGV[5 + 5 * n + i])
      if off and off >= 0 and off <= offMax and off == math.floor(off) then p.off = off end
      p.used = used[i]
      found[i] = p.alg.settleFind(p, nil)
      if found[i] and p.already then already = true end
    end
    if found[i] then any = true end
  end
end
if not any then return out end
-- What a fast path wrote goes when the call settles nothing.
local function undo()
  for i = 1, n do
    if ps[i].alg.settleUndo then ps[i].alg.settleUndo(ps[i]) end
  end
end
if already then
  undo()
  out[1] = 2
  return out
end
if gateEnds then
  local ttl = math.min(gateEnds, at + SETTLE_AGE_MAX) - now + GRACE
  if not redis.call('SET', KEYS[n + 1], '1', 'NX', 'PX', ttl) then
    -- Taken by a settle (again: 409), or by a refund (refund-driver.lua.ts): one that gave a
    -- count back ("r…") leaves nothing to settle; one of other policies only ("p…") leaves the
    -- counts as they were, and the gate, now the settle's, keeps the refund's flags and life.
    local taken = redis.call('GET', KEYS[n + 1]) or ''
    local head = string.sub(taken, 1, 1)
    if head == 'p' then
      redis.call('SET', KEYS[n + 1], '1' .. string.sub(taken, 2), 'KEEPTTL')
    else
      undo()
      if head == 'r' then return out end
      out[1] = 2
      return out
    end
  end
end
out[1] = 1
for i = 1, n do
  if found[i] then out[i + 1] = ps[i].alg.settleWrite(ps[i], used[i]) end
end
return out
`;
