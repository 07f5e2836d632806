/**
 * Fixed windows aligned to the epoch (window i covers [i·window, (i+1)·window)), as a fragment of
 * the composed scripts (see scripts.ts).
 *
 * Key: a string `<t>:<window>:<count>`: `count` units admitted in the window of length `window`
 * that holds `t`, the time of the last admission (never before that window's start). The window
 * lives in the value, not in the key name: with the Redis clock it is only known inside the
 * script, and every key a script touches must be in KEYS (Upstash's allow-key-locking). It also
 * keeps the count exact on the caller's clock, whose windows need not line up with Redis's
 * expiry. TTL: the window's end (plus GRACE on the caller's clock, see scripts.ts).
 *
 * Why a window length and a time, not a window index: a rule's window can change, and two
 * versions of a rule run side by side during every rolling deploy, both on this key. An index read
 * with another window is meaningless (a 1-day index read as 7-day windows is a window 341 years
 * ahead, whose end was once the reset). With `window` a reader knows which window the count
 * belongs to; with `t` it knows the units were admitted in [that window's start, t]. fw_load:
 * - this rule's window, the current one: the count, as always;
 * - this rule's window, a later one, at most GRACE ahead (caller's clock only; GRACE is 0 on the
 *   Redis clock): a faster isolate already counts there; count there too and never write an
 *   older window over it (isolates would reset each other's counts at every boundary and
 *   over-admit). Never a window further ahead: the wait runs to its end. A refund never adopts;
 * - any other value whose `t` is in this rule's current window (another window length: the rule
 *   changed, or the other version wrote it): its units may all be this window's, so they count
 *   here (conservative: never a fresh budget mid-window). They matter no longer than this window:
 *   once this rule's window has moved past `t` they count for nothing, so a client is never held
 *   past this window's end, whatever the other window's length;
 * - anything else (an earlier window): nothing.
 * A count above the limit (lowered limit, the other version's count) reports 0 remaining.
 *
 * Values written before windows were stored, `<window index>:<count>`, are read as written with
 * this rule's window (what the code that wrote them did; should the window have changed in that
 * rollout, the index is an earlier window — nothing — or one far ahead, counted conservatively:
 * either way no wait beyond this rule's window).
 *
 * After a reset (its tombstone, count-stamp.lua.ts) the count is reborn with a stamp
 * `:<born>:<member>` after the count, which every write keeps; a refund or a settle of a request
 * admitted before that birth finds nothing to give back or charge.
 *
 * Redis commands: check = GET; commit = SET … PX. Allowed: 2; denied: 1. Refund: GET, SET KEEPTTL
 * (only of this rule's own window; a value the other version wrote gives back nothing). A usage
 * rule's settle (settle-driver.lua.ts): the same GET and SET KEEPTTL with a signed amount.
 * Counts are written with int() (scripts.ts): a usage rule's may pass 10^14, which Lua's
 * tostring would print with an exponent.
 * Accuracy: exact per window, but up to 2 × limit can pass within one window's length across a
 * boundary (the end of one window and the start of the next).
 */
export const FIXED_WINDOW_LUA = `
local function fw_parse(value, window, now)
  local t, w, count, born = string.match(value, '^(%-?%d+):(%d+):(%d+)(.*)$')
  if t and (born == '' or string.match(born, STAMPED)) then
    return tonumber(t), tonumber(w), tonumber(count), born ~= '' and born or nil
  end
  local idx
  idx, count = string.match(value, '^(%-?%d+):(%d+)$')
  if not idx then return nil end
  local start = tonumber(idx) * window
  return math.max(start, math.min(now, start + window - 1)), window, tonumber(count)
end

-- p.start: the window counted in; p.own: the value is this rule's window (refundable); p.born:
-- its birth stamp (count-stamp.lua.ts), kept by every write of it. Without \`adopt\` (a refund, a
-- settle: \`now\` is the request's admission) a count born after it is not the request's.
local function fw_load(p, now, adopt)
  local window = p.window
  p.start = math.floor(now / window) * window
  p.count, p.own, p.t, p.born = 0, false, nil, nil
  local value = redis.call('GET', p.key)
  if not value then return end
  if value == RESET_TOMBSTONE then
    if adopt then p.born = ':' .. int(now) .. ':' .. p.member end
    return
  end
  local t, w, count, born = fw_parse(value, window, now)
  if not t then return end
  local start = math.floor(t / w) * w
  if w == window and start == p.start then
    p.count, p.own, p.t, p.born = count, true, t, born
    if not adopt and born and not held_since(born, p) then p.own = false end
  elseif adopt and w == window and start > p.start and start <= now + GRACE then
    p.start, p.count, p.own, p.t, p.born = start, count, true, t, born
  elseif adopt and t >= p.start then
    p.count = count
  end
end

-- Gives back \`units\` of the loaded window's count (fw_load: own), never below zero; negative
-- units are charged whatever the count. Returns what it gave back (KEEPTTL: the window's end).
local function fw_give(p, units)
  if units > p.count then units = p.count end
  if units == 0 then return 0 end
  redis.call('SET', p.key,
    int(p.t) .. ':' .. p.window .. ':' .. int(p.count - units) .. (p.born or ''), 'KEEPTTL')
  return units
end

ALG['fixed-window'] = {
  check = function(p, now)
    fw_load(p, now, true)
    p.allowed = p.count + p.cost <= p.limit
  end,
  commit = function(p, now)
    p.count = p.count + p.cost
    local t = math.floor(math.max(now, p.start, p.t or now))
    redis.call('SET', p.key, t .. ':' .. p.window .. ':' .. int(p.count) .. (p.born or ''), 'PX',
      p.start + p.window - now + GRACE)
  end,
  report = function(p, now, committed)
    -- Everything frees at the window's end; cost <= limit, so a denied cost fits then.
    local ends = p.start + p.window
    local remaining = math.max(0, p.limit - p.count)
    if p.allowed then return remaining, ends, 0 end
    return remaining, ends, ends - now
  end,
  refund = REFUNDS and function(p, now)
    -- Best effort: the units come off the window the request was counted in (p.at), if that
    -- window is still the stored one; a refund for a later window gives back nothing.
    fw_load(p, p.at, false)
    if not p.own then return 0 end
    return fw_give(p, p.cost)
  end,
  -- A usage rule's settle (settle-driver.lua.ts): the window the request was counted in (p.at),
  -- still the stored one and still running: its end, else nil (nothing to charge: that window
  -- is over, and the next one's budget is fresh).
  settleFind = REFUNDS and function(p, now)
    fw_load(p, p.at, false)
    if p.own and now < p.start + p.window then return p.start + p.window end
    return nil
  end,
  -- What the request used (\`used\`) in its reservation's place: less given back (never below
  -- zero), more charged whatever the count (the request already happened). Returns the charge.
  settleWrite = REFUNDS and function(p, used)
    return -fw_give(p, p.cost - used)
  end,
}
`;
