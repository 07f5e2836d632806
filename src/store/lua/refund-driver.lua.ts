/**
 * The refund script's driver, composed with every algorithm's fragment in scripts.ts (the
 * prelude's `policies` and `records` are in scope).
 */
import { MAX_SETTLE_AGE_MS } from "../caps";

/**
 * Give back what one request consumed.
 *
 * KEYS[1..n]  the keys the request was evaluated on; when ARGV[4] is "1", KEYS[n + 1] its
 *             request-id record and KEYS[n + 2..2n + 1] the policies' reset marks; when "2",
 *             KEYS[n + 1..2n] the policies' reset marks; with the gate section, last of all, the
 *             request's once-gate (keys.ts settleGateKey)
 * ARGV[1]     the caller's clock in ms, or "" (read by the token bucket and the sliding counter)
 * ARGV[2]     the request's member id
 * ARGV[3]     n
 * ARGV[4]     "1" when KEYS[n + 1] is a request-id record; "2" when the evaluation's reset marks
 *             follow the policies (ARGV[5 + 4n + i], '' for none): refunded only if every
 *             policy's mark is still the one the evaluation saw (no reset since)
 * ARGV[5]     the store's `now` of the original decision (which window it was counted in), plus
 *             its stamp offset if it had one (the log's refund finds the request's times by it)
 * ARGV[6..]   per policy: algorithm, limit, window ms, cost (as evaluated)
 * then "g"    the gate section, after the marks if any: one value more, a character per policy,
 *             "1" for a usage rule's count (a fixed window, a period), else "0"
 * ARGV[#ARGV] when ARGV[4] is "1": the call's fingerprint, as the evaluation sent it
 *
 * A usage rule's count keeps no entry per request, so its refund and its settle would each move
 * the count by what the request holds: the gate makes them one or the other. The refund takes it
 * first (`SET … NX PX`, value "r", which the settle answers as unknown: settle-driver.lua.ts); if
 * a settle (or a refund) took it before, the counts give back nothing (what the settle charged is
 * what the request used) and the rest is refunded as a partial refund: a request-id record is
 * still checked, and left as it is. In the same script as the refund, so never half done: no
 * gate taken with the units kept, no units given back under a gate a settle then takes.
 *
 * With a request-id record, the refund happens only if the record exists, says "admitted" and
 * no policy was reset since (the reset already forgot the request), and the record is deleted: a
 * second refund gives back nothing, and a retry of the request is decided (and counted) afresh.
 * Returns {refunded (0|1), then units given back per policy}.
 *
 * Redis commands of a usage count's refund: `SET … NX PX` of the gate + GET + SET KEEPTTL of the
 * count (with the EVALSHA, 4); after a settle, the gate's refused `SET` alone (2).
 */
export const REFUND_DRIVER = `
-- A settle more than MAX_SETTLE_AGE_MS (a day) after its admission charges nothing: the gate
-- need not outlive that (plus a minute for clocks apart).
local GATE_LIFE = ${MAX_SETTLE_AGE_MS + 60_000}
local n = tonumber(ARGV[3])
local ps, err = policies(n, 5, ARGV[2], tonumber(ARGV[5]))
if not ps then return redis.error_reply(err) end
local out = {0}
local mode = ARGV[4]
-- The gate section, after the policies and their marks (the fingerprint stays last).
local g = 6 + 4 * n
if mode == '2' then g = g + n end
local kept = nil
if ARGV[g] == 'g' then
  if not redis.call('SET', KEYS[#KEYS], 'r', 'NX', 'PX', GATE_LIFE) then
    kept = ARGV[g + 1]
    local rest = false
    for i = 1, n do
      out[i + 1] = 0
      if string.sub(kept, i, i) ~= '1' then rest = true end
    end
    if not rest then return out end
  end
end
if mode == '2' then
  -- A reset since the evaluation (a mark it did not see) deleted what it counted: whatever the
  -- log holds now is another request's, even at the very same time, and stays.
  local got = redis.call('MGET', unpack(KEYS, n + 1, 2 * n))
  for i = 1, n do
    if (got[i] or '') ~= ARGV[5 + 4 * n + i] then
      for j = 1, n do out[j + 1] = 0 end
      return out
    end
  end
elseif mode == '1' then
  local record = KEYS[n + 1]
  local stored, _, fp, member = records().read(n)
  -- Refunded only as evaluated: other costs than recorded would give back what it never took;
  -- and only the decision the record names (a retry decided afresh under the same id is another).
  local other = member ~= nil and member ~= '' and member ~= ARGV[2]
  if not stored or string.sub(stored, 1, 1) ~= '1' or records().conflict(fp, n) or other then
    for i = 1, n do out[i + 1] = 0 end
    return out
  end
  -- Without the counts a refund is partial: the record belongs to the whole request, so a retry
  -- still replays it (and counts nowhere).
  if not kept then redis.call('DEL', record) end
end
local now = nil
out[1] = 1
for i = 1, n do
  local p = ps[i]
  if kept and string.sub(kept, i, i) == '1' then
    out[i + 1] = 0
  else
    if now == nil and p.alg.refundReadsClock then now = clock(ARGV[1]) end
    out[i + 1] = p.alg.refund(p, now)
  end
end
return out
`;
