import { compileRingState, ringStateTable } from "./ring-state";

/**
 * The ring's refund (sliding-log-ring.lua.ts has its decisions, ring-codec.lua.ts the layout):
 * the fragment's `refund`, defined only in the refund script (REFUNDS).
 *
 * Refund: the request's slots (the newest cost slots holding its time) are cut out in order: the
 * slots admitted after them move back, and the gap and as many empty slots follow, so the empty
 * slots are the oldest (the capacity is back at once, not when the refunded slots would have left)
 * and remaining and reset stay exact. It reads the first 1 kB (the header; a small ring whole),
 * then back from the gap in ranges that double until it holds them, and writes (SETRANGE) only
 * the slots from the oldest of them on, plus the header when the gap moved back before g0: O(cost
 * + units admitted since the request). At limit 100 000, a refund of 1 just after its request
 * reads under 2 kB and writes under 100 B of the 400 kB ring. One whose search passes half the
 * ring (an old request: moving what came after it would cost about a rewrite) reads the rest in
 * one go and writes the ring whole (SET … KEEPTTL), as every refund did before: the whole ring
 * read once and written once at most.
 */
export const RING_REFUND_LUA = compileRingState(`
local ringRefund = REFUNDS and function(p, now)
  -- The header, or a small ring whole (one read either way): how far by the rule's limit now.
  local s
  if RING_HDR + 4 * (p.limit + 1) <= RING_WHOLE_MAX then
    s = redis.pcall('GETRANGE', p.key, '0', RING_WHOLE_LAST)
  else
    s = redis.pcall('GETRANGE', p.key, '0', RING_PREFIX_LAST)
  end
  local C = codec()
  -- No ring (nothing, or another type at the key: the read's error): nothing of it to give back.
  if not C.isRing(s) then return 0 end
  local L, g0, e, base, top, exp = C.ringFields(s)
  if not L then return 0 end
  local target = p.at - base
  if target < 1 or target > RING_VALUE_MAX then return 0 end
  local N, key = L + 1, p.key
  local whole = RING_HDR + 4 * N <= RING_WHOLE_MAX and s
  -- A small ring stored under a larger limit than the rule's now: read it whole.
  if whole and #s == RING_PREFIX then
    whole = redis.call('GET', key)
    s = whole
  end
  -- tail: the newest R slots, oldest first (logical [L - R, L), 0 = the oldest slot).
  local gap, tail, R
  if whole then
    gap = ringGapIn(s, RING_HDR + 1)
    if not gap then return 0 end
    R = L
    tail = C.ringRange(key, whole, N, (gap + 1) % N, L)
  else
    -- The newest slots are just before the gap, which is at most GAP_DRIFT slots past g0 (or
    -- among the slots read first, where g0 is not kept up): one range from a little before it
    -- holds the gap and the slots a prompt refund looks for.
    local first = ringGapIn(s, RING_HDR + 1)
    if first then g0 = first end
    local W = p.cost + 4 * GAP_DRIFT
    if W > N - GAP_DRIFT - 1 then W = N - GAP_DRIFT - 1 end
    local near = C.ringRange(key, false, N, (g0 - W) % N, W + GAP_DRIFT + 1)
    local gi = ringGapIn(near, 4 * W + 1)
    if gi then
      gap, R = (g0 + gi) % N, W + gi
      tail = string.sub(near, 1, 4 * R)
    else
      -- Not where the header says (only a ring written by something else): read whole.
      whole = redis.call('GET', key)
      gap = ringGapIn(whole, RING_HDR + 1)
      if not gap then return 0 end
      R = L
      tail = C.ringRange(key, whole, N, (gap + 1) % N, L)
    end
  end
  -- The newest c slots holding exactly the request's time (equal times are interchangeable),
  -- searched back from the newest end in ranges that double: what a refund soon after its
  -- request reads is its slots and the ones admitted since. Empty slots are only ever the
  -- oldest (admissions take the oldest slots): one means there is nothing older to find.
  local needle, c = C.p32(target), p.cost
  local hits = {} -- newest first
  -- data: slots from logical \`first\` on; its hits, newest first, while fewer than c.
  local function scan(data, first)
    local found, at = {}, 1
    while true do
      at = string.find(data, needle, at, true)
      if not at then break end
      if (at - 1) % 4 == 0 then
        found[#found + 1] = first + (at - 1) / 4
        at = at + 4
      else
        at = at + 1
      end
    end
    for i = #found, 1, -1 do
      if #hits == c then return end
      hits[#hits + 1] = found[i]
    end
  end
  scan(tail, L - R)
  -- Past half the ring, moving the slots after the request's costs about what rewriting the
  -- ring does (measured): the rest is read in one go and the ring rewritten whole (SET), as a
  -- refund of an old request always was.
  local rewrite = false
  while #hits < c and R < L and u32(tail, 1) ~= 0 do
    local more = R
    if 2 * (R + more) > L then more, rewrite = L - R, not whole end
    local chunk = C.ringRange(key, whole, N, (gap + 1 + L - R - more) % N, more)
    scan(chunk, L - R - more)
    tail = chunk .. tail
    R = R + more
  end
  local h = #hits
  if h == 0 then return 0 end
  if rewrite then
    -- tail is the whole ring from its oldest slot: the hits cut out, the gap and as many empty
    -- slots first.
    table.sort(hits)
    local parts, prev = { RING_GAP, string.rep('\\0\\0\\0\\0', h) }, 0
    for _, j in ipairs(hits) do
      parts[#parts + 1] = string.sub(tail, 4 * prev + 1, 4 * j)
      prev = j + 1
    end
    parts[#parts + 1] = string.sub(tail, 4 * prev + 1)
    local r = ${ringStateTable({ L: "L", g0: "0", e: "h", base: "base", top: "top", exp: "exp" })}
    redis.call('SET', key, C.ringHeader(r) .. table.concat(parts), 'KEEPTTL')
    return h
  end
  -- Cut out in order: the slots from the oldest hit on, less the hits, move back h slots, and
  -- the gap and h empty slots follow them: the gap moves back h, so the empty slots are the
  -- oldest (the capacity is back at once) and every other slot keeps its order. One write of
  -- those slots (two when they wrap past the string's end), none of the ones before.
  local j0 = hits[h]
  local parts, prev = {}, j0
  for i = h, 1, -1 do
    local j = hits[i]
    parts[#parts + 1] = string.sub(tail, 4 * (prev - L + R) + 1, 4 * (j - L + R))
    prev = j + 1
  end
  parts[#parts + 1] = string.sub(tail, 4 * (prev - L + R) + 1)
  parts[#parts + 1] = RING_GAP .. string.rep('\\0\\0\\0\\0', h)
  local bytes = table.concat(parts)
  local from = (gap + 1 + j0) % N
  local n = L - j0 + 1
  if from + n <= N then
    redis.call('SETRANGE', key, RING_HDR + 4 * from, bytes)
  else
    redis.call('SETRANGE', key, RING_HDR + 4 * from, string.sub(bytes, 1, 4 * (N - from)))
    redis.call('SETRANGE', key, RING_HDR, string.sub(bytes, 4 * (N - from) + 1))
  end
  -- The check finds the gap from g0 (GAP_DRIFT slots on at most) and the hint e counted from
  -- g0's oldest slot: both still hold (the h empty slots are among the oldest) unless the gap
  -- moved back before g0, when the header follows it.
  local drift = (gap - g0) % N
  if drift < h then
    e = e - drift
    if e < 0 then e = 0 end
    e = e + h
    if e > L then e = L end
    local r = ${ringStateTable({ L: "L", g0: "(gap - h) % N", e: "e", base: "base", top: "top", exp: "exp" })}
    redis.call('SETRANGE', key, 0, C.ringHeader(r))
  end
  return h
end
`);
