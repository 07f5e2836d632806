/**
 * The sliding-window counter: two aligned fixed windows, weighted — a fragment of the composed
 * scripts (see scripts.ts).
 *
 * The estimate at elapsed time e into the current window is
 *   previous count × (window − e) / window + current count,
 * i.e. it assumes the previous window's admissions were spread evenly over it. A request of cost
 * c passes when estimate + c ≤ limit; the comparison is done in integers
 * (prev·(window − e) + (cur + c)·window ≤ limit·window, exact below 2^53), so there is no rounding
 * in the admission itself. A denied request consumes nothing: the counters are left untouched.
 *
 * Key: a string `<t>:<window>:<current count>:<previous count>` — O(1) memory whatever the limit:
 * the counts of the window of length `window` that holds t (the last admission, never before that
 * window's start) and of the window before it. The window lives in the value, not in the key (see
 * fixed-window.lua.ts for why, and why a length and a time rather than an index: a rule's window
 * can change, and two versions of a rule share this key during a rolling deploy). TTL: until the
 * current window's count stops mattering, the end of the next window.
 *
 * sc_load reads a value as follows:
 * - this rule's window, a later one at most GRACE ahead (caller's clock only; GRACE is 0 on the
 *   Redis clock): a faster isolate has moved on; count in its window (the previous window then
 *   weighs more than its share: conservative) and never write an older window over it. Never a
 *   window further ahead: the wait would run to its end;
 * - otherwise each count is placed by when its units were admitted — the current count's in
 *   [its window's start, t], the previous count's in the window before: into this rule's current
 *   window if any of them may fall in it (as recent as possible: conservative), else into its
 *   previous window if any may fall there, else nowhere (they weigh nothing). For a value of this
 *   rule's window that is exactly the usual reading; for another window length (the rule changed,
 *   or the other version wrote it) the counts carry over conservatively and stop mattering once
 *   this rule's own windows have moved past them, so a client is never held longer than this
 *   rule's own windows allow.
 * - Counts above the limit (a lowered limit, the other version's larger count) are weighed as a
 *   full window (the raw previous count is kept when writing, so the other version loses nothing
 *   it counted). So whatever was stored, a request of cost c ≤ limit fits within
 *   window × (1 + c/limit) of now: a full previous window weighs until c/limit into the next.
 * Values written before windows were stored, `<window index>:<cur>:<prev>`, are read as written
 * with this rule's window (see fixed-window.lua.ts).
 *
 * Redis commands: check = GET; commit = SET … PX. Allowed: 2; denied: 1. Refund: GET, SET KEEPTTL
 * (only of this rule's own window; a value the other version wrote gives back nothing).
 * Accuracy: never admits more than the limit within any window-aligned pair under even traffic;
 * with bursty traffic the real count over a sliding window can deviate from the limit either way
 * (a burst at the end of the previous window is under-weighted early in the next).
 */
export const SLIDING_COUNTER_LUA = `
local function sc_parse(value, window, now)
  local t, w, cur, prev = string.match(value, '^(%-?%d+):(%d+):(%d+):(%d+)$')
  if t then return tonumber(t), tonumber(w), tonumber(cur), tonumber(prev) end
  local idx
  idx, cur, prev = string.match(value, '^(%-?%d+):(%d+):(%d+)$')
  if not idx then return nil end
  local start = tonumber(idx) * window
  return math.max(start, math.min(now, start + window - 1)), window, tonumber(cur), tonumber(prev)
end

-- n units admitted at the latest at b: in the current window, the previous one, or neither.
local function sc_place(p, b, n)
  if b >= p.start then p.cur = p.cur + n
  elseif b >= p.start - p.window then p.prev = p.prev + n end
end

-- p.own: the value is this rule's window (the current or the previous one: refundable).
local function sc_load(p, now)
  local window = p.window
  p.start = math.floor(now / window) * window
  p.cur, p.prev, p.own, p.t = 0, 0, false, nil
  local value = redis.call('GET', p.key)
  local t, w, cur, prev
  if value then t, w, cur, prev = sc_parse(value, window, now) end
  if t then
    local start = math.floor(t / w) * w
    if w == window and start > p.start and start <= now + GRACE then
      p.start, p.cur, p.prev, p.own, p.t = start, cur, prev, true, t
    else
      if w == window and (start == p.start or start == p.start - window) then
        p.own = true
        if start == p.start then p.t = t end
      end
      sc_place(p, math.max(t, start), cur)
      sc_place(p, start - 1, prev)
    end
  end
  p.cur = math.min(p.cur, p.limit)
end

local function sc_prev(p)
  return math.min(p.prev, p.limit)
end

-- The earliest time (ms, >= now) at which a request of cost c fits, assuming nobody else consumes.
local function sc_fits_at(p, c, now)
  local window, limit, prev = p.window, p.limit, sc_prev(p)
  -- A cost above the limit never fits (callers refuse it).
  if c > limit then return now + window end
  if p.cur + c <= limit then
    if prev == 0 then return now end
    -- prev·(window − e) ≤ (limit − cur − c)·window  ⇔  e ≥ window − (limit − cur − c)·window/prev
    local e = window - math.floor((limit - p.cur - c) * window / prev)
    if e < window then return math.max(p.start + e, now) end
  end
  -- Not in this window: in the next, the current count becomes the weighted previous one.
  if p.cur == 0 then return p.start + window end
  local e = window - math.floor((limit - c) * window / p.cur)
  return p.start + window + math.max(e, 0)
end

local function sc_remaining(p, now)
  local window = p.window
  local free = p.limit * window - sc_prev(p) * (window - (now - p.start)) - p.cur * window
  return math.max(0, math.floor(free / window))
end

local function sc_store(p, t, ...)
  redis.call('SET', p.key, math.floor(t) .. ':' .. p.window .. ':' .. p.cur .. ':' .. p.prev, ...)
end

ALG['sliding-counter'] = {
  check = function(p, now)
    sc_load(p, now)
    local window = p.window
    p.allowed = sc_prev(p) * (window - (now - p.start)) + (p.cur + p.cost) * window
      <= p.limit * window
  end,
  commit = function(p, now)
    p.cur = p.cur + p.cost
    sc_store(p, math.max(now, p.start, p.t or now), 'PX', p.start + 2 * p.window - now + GRACE)
  end,
  report = function(p, now, committed)
    local remaining = sc_remaining(p, now)
    if p.allowed then
      -- When the next unit frees: the estimate falls by enough for one more unit.
      if remaining >= p.limit then return remaining, now, 0 end
      return remaining, sc_fits_at(p, remaining + 1, now), 0
    end
    local at = sc_fits_at(p, p.cost, now)
    return remaining, at, at - now
  end,
  refund = REFUNDS and function(p, now)
    -- Best effort: take the units off the window the request was counted in (p.at) if it is
    -- still the current or the previous one; otherwise they no longer weigh anything.
    local window = p.window
    local counted = math.floor(p.at / window) * window
    sc_load(p, now)
    if not p.own then return 0 end
    local units = 0
    if counted == p.start then
      units = math.min(p.cost, p.cur)
      p.cur = p.cur - units
    elseif counted == p.start - window then
      units = math.min(p.cost, p.prev)
      p.prev = p.prev - units
    end
    if units == 0 then return 0 end
    sc_store(p, p.t or p.start, 'KEEPTTL')
    return units
  end,
}
`;
