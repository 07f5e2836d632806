/**
 * The scripts Redis runs, composed from one fragment per algorithm plus a driver: evaluate (one
 * per algorithm and one mixed) and refund. Adding an algorithm: its fragment file, its entry in
 * ALGORITHMS (algorithm.ts), and the FRAGMENTS entry the compiler then asks for.
 */
import { ALGORITHMS, type Algorithm, isLogAlgorithm, USAGE_ALGORITHMS } from "../algorithm";
import { clockedScript } from "../clock-slots";
import { STAMP_AHEAD_MAX_MS } from "../keys";
import { CALENDAR_LUA } from "./calendar.lua";
import { CALENDAR_PLANS_LUA } from "./calendar-plans.lua";
import { CLOCK_LUA } from "./clock.lua";
import { CONCURRENCY_LUA } from "./concurrency.lua";
import { COUNT_STAMP_LUA, STAMPED_COUNTS } from "./count-stamp.lua";
import { FIXED_WINDOW_LUA } from "./fixed-window.lua";
import { foldConstants } from "./fold-constants";
import { FENCE_LUA } from "./placement-fence.lua";
import { REFUND_DRIVER } from "./refund-driver.lua";
import { REQUEST_RECORDS_LUA } from "./request-records.lua";
import { RING_CODEC_LUA } from "./ring-codec.lua";
import { SETTLE_DRIVER } from "./settle-driver.lua";
import { SLIDING_COUNTER_LUA } from "./sliding-counter.lua";
import { SLIDING_LOG_RING_LUA } from "./sliding-log-ring.lua";
import { TOKEN_BUCKET_LUA } from "./token-bucket.lua";
import { WEIGHTED_LOG_LUA } from "./weighted-log.lua";

/**
 * Every script is composed from one fragment per algorithm plus a driver, so one policy and many
 * policies run the very same Lua. A fragment registers `ALG[name] = { check, commit, report,
 * refund }` on a table `p` for one policy (key, limit, window, cost, member, at):
 *   check(p, now)              reads state, sets p.allowed (this policy alone would admit)
 *   commit(p, now)             consumes p.cost (only called when every policy admits)
 *   report(p, now) → remaining, reset, retryAfterMs (after commit, or as nothing were consumed)
 *   refund(p, now) → units     gives back what a request consumed (`now`: the refund's clock,
 *                              read by every refund for its age bound)
 *   settleFind(p, now), settleWrite(p, used), settleGated: a usage rule's settle
 *                              (settle-driver.lua.ts), for the algorithms a usage rule counts in
 *
 * The shebang lets Upstash run scripts on different keys in parallel (every key is in KEYS); the
 * local bridge strips the flag for stock Redis. Time is the Redis clock (TIME) unless the caller
 * passes its own in ARGV[1]: one clock for every isolate in every location, by default.
 */
const PRELUDE = `#!lua flags=allow-key-locking
local ALG = {}
${CLOCK_LUA}-- Added to every TTL on the caller's clock: isolates' clocks differ, and a key must not expire
-- (in Redis time) while a slower isolate still counts in it. State stays exact either way (each
-- algorithm keeps its window or time in the value); the grace only delays reclaiming memory.
local GRACE = 0
if ARGV[1] ~= nil and ARGV[1] ~= '' then GRACE = 1000 end
-- An integer as text: tostring prints 14 significant digits, past them with an exponent (a usage
-- rule's count may pass 10^14 by its extra charges); exact to 2^53 (Lua numbers are doubles).
local function int(n) return string.format('%.0f', n) end
-- How far ahead of now a log admission may be stamped (a lease's units: stamped at its end).
local STAMP_AHEAD_MAX = ${STAMP_AHEAD_MAX_MS}

-- ARGV[from + 1 ..] holds n policies of 4 values each: algorithm, limit, window ms, cost. A log
-- commits its admissions stamped at \`stamp\` (now, or a lease's end).
local function policies(n, from, member, at, stamp)
  local ps = {}
  for i = 1, n do
    local b = from + (i - 1) * 4
    local alg = ALG[ARGV[b + 1]]
    if not alg then return nil, 'unknown algorithm: ' .. tostring(ARGV[b + 1]) end
    -- allowed and ring set now: ten fields size the table's hash at 16, room for what the
    -- fragments add (a table's hash grows by reallocating: measured, that costs more than this).
    local window, bounds = tonumber(ARGV[b + 3]), nil
    -- A calendar policy's window is its period starts (calendar.lua.ts).
    if alg.bounds then bounds, window = alg.bounds(ARGV[b + 3]) end
    if not window then return nil, 'bad window: ' .. tostring(ARGV[b + 3]) end
    ps[i] = { key = KEYS[i], alg = alg, limit = tonumber(ARGV[b + 2]),
      window = window, cost = tonumber(ARGV[b + 4]), member = member, at = at,
      stamp = stamp, allowed = false, ring = false, over = false, bounds = bounds }
  end
  return ps
end

${REQUEST_RECORDS_LUA}`;

/**
 * Evaluate n policies for one request, all or nothing.
 *
 * KEYS[1..n]  one key per policy; when ARGV[4] is "1", KEYS[n + 1] the request-id record and
 *             KEYS[n + 2..2n + 1] the policies' reset marks (keys.ts resetMarkKey); when it is
 *             "2", KEYS[n + 1..2n] the policies' reset marks
 * ARGV[1]     the caller's clock in ms, or "" for the Redis clock
 * ARGV[2]     a member id unique to this call (log members are `<id>.<n>`)
 * ARGV[3]     n
 * ARGV[4]     "1" when KEYS[n + 1] is a request-id record; "2" to read the reset marks (a
 *             lease: the reply ends with them, one string per policy, '' for none); else "0"
 * ARGV[5]     ms ahead of now to stamp the logs' admissions (0; a lease: its lifetime, at most
 *             STAMP_AHEAD_MAX_MS): the O(1) algorithms ignore it
 * ARGV[6..]   per policy: algorithm, limit, window ms (a calendar policy: its period starts,
 *             "<s0>:<s1>:…"), cost
 * ARGV[6 + 4n] "o" when the call reads plans (plans.ts): KEYS' last is the plans hash, then per
 *             policy its name ('' for one that does not opt in) and per policy its encoded
 *             client key. Limit overrides replace the policies' limits; a live key block answers
 *             {-2, policy (1-based), until (0 = none), now}, nothing read or counted; a calendar
 *             policy whose periods were not computed with its override's anchor answers
 *             {-4, policy, anchor ('' for none)}, nothing counted; the reply ends with the n
 *             effective limits.
 * then "f"    the placement fence (placement-fence.ts fenceArgs), its record the last KEY: a
 *             caller whose placement is stale is answered {-3, code, at, endsBy}, nothing read
 *             or counted.
 * ARGV[#ARGV] when ARGV[4] is "1": the call's fingerprint (request-records.lua.ts)
 *
 * Phase 1 checks every policy; phase 2 commits every policy only if all admit: a request denied
 * by one policy consumes nothing in any. Returns
 *   {allowed, deniedBy (1-based, 0 = none), replayed (0|1), now,
 *    then per policy: allowed, remaining, reset, retryAfterMs}
 * `deniedBy` is the denying policy with the longest wait (the one Retry-After must honour); the
 * per-policy `allowed` says what each policy alone would do.
 *
 * With a request id, the reply is stored in KEYS[n + 1] and returned (replayed = 1) to a retry:
 * for the longest window when admitted (the request is counted once), until retryAfterMs when
 * denied (it consumed nothing, so re-deciding after that counts nothing twice, and a retry that
 * honours Retry-After is not denied forever), at most RECORD_TTL_MAX_MS. A record written before
 * a reset of any of its policies is not replayed (records().read). A retry whose policies differ
 * from the record's fingerprint (algorithm, limit, window or cost as the caller asked them) is
 * not replayed either, nor decided: the reply is {-1, policy (1-based), field (1 algorithm, 2 limit, 3 window ms, 4 cost),
 * recorded value, asked value} and nothing is counted or written. Commands: one MGET (the record
 * and the marks), + SET … PX of the record. A replay's reply ends with one more value: the
 * member id a call with a concurrency policy was decided under (its slot), else ''. An
 * admission (not a replay) with a weighted-log policy ends with n offsets (see the end).
 */
const EVALUATE_DRIVER = `${FENCE_LUA}${CALENDAR_PLANS_LUA}
local now = clock(ARGV[1])
local n = tonumber(ARGV[3])

-- The placement fence (placement-fence.ts), after the plans section or in its place: its record
-- is the last KEY. A caller whose view of the placement is stale is refused before anything is
-- read or counted: {-3, code, at, endsBy}.
local ob = 6 + 4 * n
local fb = ob
if ARGV[ob] == 'o' then fb = ob + 1 + 2 * n end
local plansAt = #KEYS
if ARGV[fb] == 'f' then
  plansAt = #KEYS - 1
  local refused = fence(KEYS[#KEYS], fb, now)
  if refused then return refused end
end

-- Plans (ARGV[6 + 4n] == 'o'): the plans hash is the last KEY (before the fence's); per policy
-- its name (ARGV[6 + 4n + i], '' for a policy that does not opt in) and its encoded client key
-- (ARGV[6 + 5n + i]). One HMGET reads every opted policy's limit override and key block. A live
-- block refuses the request before anything is read or counted: {-2, policy, until, now}.
local limits = nil
if ARGV[ob] == 'o' then
  local fields, at = {}, {}
  for i = 1, n do
    local name = ARGV[ob + i]
    if name ~= '' then
      local suffix = name .. '|' .. ARGV[ob + n + i]
      fields[#fields + 1] = 'o|' .. suffix
      fields[#fields + 1] = 'b|' .. suffix
      at[i] = #fields - 1
    end
  end
  local got = redis.call('HMGET', KEYS[plansAt], unpack(fields))
  limits = {}
  for i = 1, n do
    local j = at[i]
    limits[i] = tonumber(ARGV[5 + (i - 1) * 4 + 2])
    if j then
      local block = tonumber(got[j + 1])
      if block and (block == 0 or block > now) then return {-2, i, block, now} end
      local limit, anchor = cal_override(got[j])
      if limit then limits[i] = limit end
      -- A calendar policy's periods must be its override's anchor's: else ask for them.
      local mismatch = cal_anchor_mismatch(5 + (i - 1) * 4, anchor)
      if mismatch then return {-4, i, mismatch} end
    end
  end
end
-- The effective limits end the reply of a call that reads plans.
local function withLimits(out)
  if limits then
    for i = 1, n do out[#out + 1] = limits[i] end
  end
  return out
end

local record, marks = nil, nil
if ARGV[4] == '1' then
  record = KEYS[n + 1]
  local stored, fp
  local member
  stored, marks, fp, member = records().read(n)
  if stored then
    local conflict = records().conflict(fp, n)
    if conflict then return conflict end
    local out = {}
    for v in string.gmatch(stored, '[^,]+') do out[#out + 1] = tonumber(v) end
    out[3] = 1
    -- A replay ends with the member id it was decided under ('' for an older record).
    out = withLimits(out)
    out[#out + 1] = member or ''
    return out
  end
end

local ahead = tonumber(ARGV[5]) or 0
if ahead < 0 or ahead > STAMP_AHEAD_MAX then return redis.error_reply('stamp offset out of range') end
local ps, err = policies(n, 5, ARGV[2], now, now + ahead)
if not ps then return redis.error_reply(err) end
local all = true
for i = 1, n do
  local p = ps[i]
  if limits then p.limit = limits[i] end
  -- An override below the cost (0: nothing at all) denies without reading the log.
  if p.cost > p.limit then p.over = true else p.alg.check(p, now) end
  if not p.allowed then all = false end
end
local longestWindow = 0
for i = 1, n do
  if all then ps[i].alg.commit(ps[i], now) end
  if ps[i].window > longestWindow then longestWindow = ps[i].window end
end

local out = {all and 1 or 0, 0, 0, now}
local longestWait = -1
for i = 1, n do
  local p = ps[i]
  local remaining, reset, wait = 0, now + p.window, p.window
  if not p.over then
    remaining, reset, wait = p.alg.report(p, now, all)
  elseif p.alg.overReset then
    reset, wait = p.alg.overReset(p, now)
  end
  out[#out + 1] = p.allowed and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = wait
  if not p.allowed and wait > longestWait then out[2], longestWait = i, wait end
end

if record then
  -- An admission is replayed for the longest window (plus the caller-clock GRACE, like every
  -- other key); a denial only until its wait is over, so a client that honours Retry-After is
  -- decided afresh.
  local ttl = longestWindow + GRACE
  if not all then ttl = longestWait end
  -- Capped so that a reset mark (kept as long) outlives every record written before it.
  if ttl > RECORD_TTL_MAX then ttl = RECORD_TTL_MAX end
  if ttl > 0 then redis.call('SET', record, records().value(out, marks, n), 'PX', ttl) end
elseif ARGV[4] == '2' then
  -- A lease: the marks it is granted under, which its give-backs carry (see the refund).
  local got = redis.call('MGET', unpack(KEYS, n + 1, 2 * n))
  for i = 1, n do out[#out + 1] = got[i] or '' end
end
out = withLimits(out)
-- An admission with a weighted log ends with where each policy's entry went (-1: not a log's):
-- its settle writes there (weighted-settle.lua.ts).
local offsets = false
for i = 1, n do offsets = offsets or (all and ps[i].alg.offsets) end
if offsets then
  for i = 1, n do out[#out + 1] = ps[i].offset or -1 end
end
return out
`;

const FRAGMENTS: Record<Algorithm, string> = {
  "sliding-log": SLIDING_LOG_RING_LUA,
  "sliding-log-weighted": WEIGHTED_LOG_LUA,
  "fixed-window": FIXED_WINDOW_LUA,
  "sliding-counter": SLIDING_COUNTER_LUA,
  "token-bucket": TOKEN_BUCKET_LUA,
  concurrency: CONCURRENCY_LUA,
  calendar: CALENDAR_LUA,
};

/**
 * @param refunds the script refunds: a fragment's `refund = REFUNDS and function …` makes its
 *   closure only then. Every function a script defines is made again on each EVALSHA, and an
 *   evaluate never refunds.
 */
function compose(algorithms: readonly Algorithm[], driver: string, refunds: boolean): string {
  // The log's ring codec, once per script that holds the log.
  const codec = algorithms.some(isLogAlgorithm) ? RING_CODEC_LUA : "";
  // A count's birth stamp, once per script that holds a count a reset leaves a tombstone for.
  const stamp = algorithms.some((name) => STAMPED_COUNTS.has(name)) ? COUNT_STAMP_LUA : "";
  const fragments = algorithms.map((name) => FRAGMENTS[name]).join("");
  return foldConstants(
    `${PRELUDE}local REFUNDS = ${refunds}\n${codec}${stamp}${fragments}${driver}`,
  );
}

/**
 * One script per algorithm (the short text EVAL sends after NOSCRIPT, and the SHA a benchmark of
 * one algorithm sees) and one for calls that mix algorithms.
 */
export const EVALUATE_SCRIPTS = Object.fromEntries([
  ...ALGORITHMS.map((name) => [name, compose([name], EVALUATE_DRIVER, false)]),
  ["mixed", compose(ALGORITHMS, EVALUATE_DRIVER, false)],
]) as Record<Algorithm | "mixed", string>;

export const REFUND_SCRIPT = compose(ALGORITHMS, REFUND_DRIVER, true);

/** A usage request's settle: its fragments' settle code (fixed-window, calendar, the weighted log). */
export const SETTLE_SCRIPT = compose(
  ALGORITHMS.filter((name) => USAGE_ALGORITHMS.has(name)),
  SETTLE_DRIVER,
  true,
);

// Every composed script takes its clock in ARGV[1] (script-inputs.ts).
for (const script of [...Object.values(EVALUATE_SCRIPTS), REFUND_SCRIPT, SETTLE_SCRIPT]) {
  clockedScript(script, 0);
}
