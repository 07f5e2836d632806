import { RECORD_TTL_MAX_MS } from "../keys";

/**
 * A request id's record, as a fragment of the composed scripts' prelude (scripts.ts): what a call
 * with a request id reads before deciding and writes after, so a retry is answered as the first
 * call was, and a retry with other parameters is a conflict, never a replay.
 */
export const REQUEST_RECORDS_LUA = `-- With a request id: KEYS[n + 1] is its record and KEYS[n + 2 .. 2n + 1] the policies' reset
-- marks, read in one MGET, and ARGV's last value is the call's fingerprint (script-inputs.ts):
-- what the caller asked, per policy \`algorithm:limit:window:cost\` joined by ','. It is sent, not
-- built from the policies' ARGV, because the limiter may decide with a limit it derived (a moved
-- key's limit less what its old shard holds, which falls with time): a retry asks the same, and
-- must match. A record holds the reply (numbers, ','), ';', the marks it saw (one per policy, ''
-- for none; all empty when no policy had a mark), ';', its fingerprint, ';' and the member id it
-- was decided under (a slot's id: a replay hands the same slot back). A record is
-- forgotten (nil) when a policy now has a mark it did not see: that policy was reset after the
-- record was written, and the reset forgets everything recorded for its key. A mark gone since
-- (expired) proves nothing was reset after it, so the record stands. A call whose fingerprint
-- differs is a conflict (R.conflict), never a replay: the same id with another cost, limit,
-- window or algorithm is another request, and replaying the first's answer would admit it for
-- free. Records written before fingerprints ("values" or "values;marks") are replayed as they
-- always were, and before members with none: they expire within their window (at most
-- RECORD_TTL_MAX).
local RECORD_TTL_MAX = ${RECORD_TTL_MAX_MS}
-- Built on first use in a call (only calls with a request id read or write a record): every
-- function a script defines is a closure made again on each EVALSHA.
local RECORDS
local function records()
  if RECORDS then return RECORDS end
  local R = {}
  -- The call's fingerprint, as the limiter sent it.
  function R.fingerprint()
    return ARGV[#ARGV]
  end

  -- Returns the stored reply (or nil), the marks now, the stored fingerprint (nil: none) and
  -- the stored member id (nil: none).
  function R.read(n)
    local got = redis.call('MGET', unpack(KEYS, n + 1, 2 * n + 1))
    local marks = {}
    for i = 1, n do marks[i] = got[i + 1] end
    local stored = got[1]
    if not stored then return nil, marks end
    local values, seen, rest = string.match(stored, '^([^;]*);([^;]*);(.*)$')
    local fp, member = nil, nil
    if values then
      fp, member = string.match(rest, '^([^;]*);(.*)$')
      if not fp then fp = rest end
    else
      values, seen = string.match(stored, '^([^;]*);(.*)$')
      if not values then values, seen = stored, '' end
    end
    local saw = {}
    for mark in string.gmatch(seen .. ',', '([^,]*),') do saw[#saw + 1] = mark end
    for i = 1, n do
      if marks[i] and marks[i] ~= (saw[i] or '') then return nil, marks end
    end
    return values, marks, fp, member
  end

  local function split(text, sep)
    local parts = {}
    for part in string.gmatch(text .. sep, '([^' .. sep .. ']*)' .. sep) do parts[#parts + 1] = part end
    return parts
  end

  -- nil when \`fp\` (stored) is absent or the call's own; else {-1, policy (1-based), field
  -- (1 algorithm, 2 limit, 3 window, 4 cost), recorded value, asked value}: the evaluate script's
  -- conflict reply.
  function R.conflict(fp, n)
    if fp == nil then return nil end
    local mine = R.fingerprint()
    if fp == mine then return nil end
    local asked = split(mine, ',')
    local i = 0
    for policy in string.gmatch(fp .. ',', '([^,]*),') do
      i = i + 1
      if i > n then break end
      local values = split(asked[i] or '', ':')
      local f = 0
      for value in string.gmatch(policy .. ':', '([^:]*):') do
        f = f + 1
        if f <= 4 and value ~= values[f] then return { -1, i, f, value, values[f] or '' } end
      end
    end
    -- Another number of policies (the record key names them all, so only a forged record).
    return { -1, 1, 1, fp, mine }
  end

  -- The member id (ARGV[2]) ends every record: a replay hands a slot call's slot back by it, and
  -- a refund gives back only the decision it names (a receipt refunded, its id retried and
  -- decided afresh, then refunded again must not give back the retry's units).
  function R.value(out, marks, n)
    local value = table.concat(out, ',')
    local seen = {}
    for i = 1, n do seen[i] = marks[i] or '' end
    return value .. ';' .. table.concat(seen, ',') .. ';' .. R.fingerprint() .. ';' .. ARGV[2]
  end
  RECORDS = R
  return R
end
`;
