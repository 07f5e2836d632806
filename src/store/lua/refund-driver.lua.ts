import { MAX_SETTLE_AGE_MS } from "../caps";

/**
 * The refund script's driver, composed with every algorithm's fragment in scripts.ts (the
 * prelude's `policies` and `records` are in scope).
 */
/**
 * Give back what one request consumed, once.
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
 * then "g"    the gate section, after the marks if any, four values more: a character per
 *             policy, "1" for a usage rule's count (a fixed window, a period), else "0"; per
 *             policy its place in the request (1-based, comma-separated); how many policies the
 *             request has; the gate's life in ms
 * ARGV[#ARGV] when ARGV[4] is "1": the call's fingerprint, as the evaluation sent it
 *
 * Nothing but the gate proves a request was not refunded yet (a log's slots of the same instant
 * are interchangeable, a count keeps no entry per request): a retried refund would give back
 * again, and the key over-admit. The gate is one key per request, its value a state character
 * and a flag per policy of the request, "1" once refunded: "p" refunded in part, no usage count
 * given back; "r" a usage count given back (or everything: "r" alone), which a settle answers as
 * unknown; "1" settled (the settle's own, settle-driver.lua.ts), its counts then give back
 * nothing (what the settle charged is what the request used) and the rest is refunded as a
 * partial refund: a request-id record is still checked, and left as it is. Policies flagged
 * already give back nothing; a call whose every policy was flagged answers 2 (already
 * refunded). In the same script as the refund, so never half done: no flag set with the units
 * kept, no units given back under a gate a settle then takes.
 *
 * With a request-id record, the refund happens only if the record exists, says "admitted" and
 * no policy was reset since (the reset already forgot the request), and the record is deleted: a
 * retry of the request is decided (and counted) afresh.
 * A refund more than MAX_SETTLE_AGE_MS after the admission (ARGV[5]), on the clock this call
 * runs on, gives nothing back, whatever the algorithm (as a settle charges nothing then): the
 * gate and a reset's tombstone live about that long, and after them a refund of a weekly window,
 * a month or a bucket could give back again, or from counts that are not the request's.
 * Returns {refunded (0|1|2: already refunded), then units given back per policy}.
 *
 * Redis commands of the gate: GET + SET … PX (when something is given back); a refund again,
 * the GET alone. A usage count's refund: GET + SET of the gate + TIME (the Redis clock only) +
 * GET + SET KEEPTTL of the count (with the EVALSHA, 6); after a settle, the gate's GET alone (2).
 */
export const REFUND_DRIVER = `
local n = tonumber(ARGV[3])
local ps, err = policies(n, 5, ARGV[2], tonumber(ARGV[5]))
if not ps then return redis.error_reply(err) end
local out = {0}
for i = 1, n do out[i + 1] = 0 end
local mode = ARGV[4]
-- The gate section, after the policies and their marks (the fingerprint stays last).
local g = 6 + 4 * n
if mode == '2' then g = g + n end
-- skip[i]: policy i gives back nothing (refunded before, or a count its settle charged).
local skip, gate = {}, nil
if ARGV[g] == 'g' then
  local counts, m = ARGV[g + 1], tonumber(ARGV[g + 3])
  local at = {}
  for k in string.gmatch(ARGV[g + 2], '%d+') do at[#at + 1] = tonumber(k) end
  local prior = redis.call('GET', KEYS[#KEYS])
  local head, flags = 'p', string.rep('0', m)
  if prior then
    head = string.sub(prior, 1, 1)
    local rest = string.sub(prior, 2)
    if #rest == m then
      flags = rest
    elseif head == 'r' then
      -- "r" alone: all of it refunded (or a gate from before flags: as much).
      flags = string.rep('1', m)
    end
  end
  local again, left = false, false
  for i = 1, n do
    if string.sub(flags, at[i], at[i]) == '1' then
      skip[i], again = true, true
    elseif head == '1' and string.sub(counts, i, i) == '1' then
      skip[i] = true
    else
      left = true
    end
  end
  if not left then
    if again then out[1] = 2 end
    return out
  end
  gate = { counts = counts, at = at, head = head, flags = flags, life = tonumber(ARGV[g + 4]) }
end
-- Too old to give back: nothing left proves it was not given back before (the gate, a reset's
-- tombstone live about that long). Read after the gate: a refund again reads nothing more.
local now = clock(ARGV[1])
if now > tonumber(ARGV[5]) + ${MAX_SETTLE_AGE_MS} then return out end
if mode == '2' then
  -- A reset since the evaluation (a mark it did not see) deleted what it counted: whatever the
  -- log holds now is another request's, even at the very same time, and stays.
  local got = redis.call('MGET', unpack(KEYS, n + 1, 2 * n))
  for i = 1, n do
    if (got[i] or '') ~= ARGV[5 + 4 * n + i] then return out end
  end
elseif mode == '1' then
  local record = KEYS[n + 1]
  local stored, _, fp, member = records().read(n)
  -- Refunded only as evaluated: other costs than recorded would give back what it never took;
  -- and only the decision the record names (a retry decided afresh under the same id is another).
  local other = member ~= nil and member ~= '' and member ~= ARGV[2]
  if not stored or string.sub(stored, 1, 1) ~= '1' or records().conflict(fp, n) or other then
    return out
  end
  -- Without every policy a refund is partial: the record belongs to the whole request, so a
  -- retry still replays it (and counts nowhere).
  local partial = false
  for i = 1, n do if skip[i] then partial = true end end
  if not partial then redis.call('DEL', record) end
end
if gate then
  local flags, head = gate.flags, gate.head
  for i = 1, n do
    if not skip[i] then
      local k = gate.at[i]
      flags = string.sub(flags, 1, k - 1) .. '1' .. string.sub(flags, k + 1)
      if head ~= '1' and string.sub(gate.counts, i, i) == '1' then head = 'r' end
    end
  end
  redis.call('SET', KEYS[#KEYS], head .. flags, 'PX', gate.life)
end
out[1] = 1
for i = 1, n do
  local p = ps[i]
  if not skip[i] then
    out[i + 1] = p.alg.refund(p, now)
  end
end
return out
`;
