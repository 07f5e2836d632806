import { STAMP_AHEAD_MAX_MS } from "../keys";
import { READ_SPAN } from "./ring-header.lua";
import { compileRingState, ringStateTable } from "./ring-state";

/**
 * Reading a ring (ring-codec.lua.ts has the layout) for a decision or a peek, never writing: the
 * check (where its gap is, whether a cost fits), its slots from the oldest, and how many of them
 * have left the window. Large rings are read by range (GETRANGE) and keep what they read. Part of
 * the ring's fragment (sliding-log-ring.lua.ts), which writes.
 */
/** The state of a ring read as stored (ringCheck's locals), built when a later step needs it. */
const STATE = ringStateTable({
  L: "K",
  o: "o",
  gap: "gap",
  g0: "g0",
  e: "e",
  base: "base",
  cf: "cf",
  cn: "cn",
  cd: "cd",
  co: "co",
  small: "small",
  whole: "whole",
  hdr: "s",
  size: "size",
});

export const RING_READS_LUA = compileRingState(`
-- The ring's check (ALG['sliding-log'].check, for a decision or a peek): loads the ring into
-- p.ring and decides whether p.cost fits; never writes. A missing key (or one of another type) or
-- a ring smaller than the limit (grown: its slots copied behind as many empty ones) become r.whole,
-- written on commit or, when the call is denied, by the report. A ring larger than the limit is
-- kept (its capacity stays; the decision counts its newest L slots), and shrunk only when its
-- string holds over twice what it must keep (ringShrink). It runs on every decision, so it is one
-- function (each is
-- a closure made on every call of the script), values stay in locals and the state table is
-- built once, whole (an in-script loop measured each field set afterwards, and each helper call,
-- in tenths of a µs).
--
-- Why a changed limit keeps the capacity: the ring holds the last K admissions (K its capacity),
-- oldest first, and with times in order the live ones are its newest. Under a limit L <= K a cost
-- c fits iff at most L - c are live, iff the c oldest of the newest L have left the window:
-- logical slots K - L .. K - L + c - 1, the decision's slots 0 .. c - 1 (offset o = K - L). That
-- is exactly what the exact log at limit L decides, counted with L at once; a slot older than
-- them that is still inside the window means more than L are live, and the decision denies then
-- too (the slots it checks are newer, so inside as well). An admission still overwrites the c
-- oldest slots of all K, so the ring goes on holding the last K admissions, which a call at the
-- larger limit reads as before. So a limit going 100 000 -> 99 999 -> 100 000 costs nothing more
-- than a decision: no slot is moved (it moved every slot, decoded and sorted, 30-90 ms of Redis a
-- call at 100 000). A limit above the capacity grows the ring once, by copying its slots (no
-- decoding, no sort) after the empty ones the limit adds, which cost nothing until written (past
-- the string's end); a limit far below shrinks its string, to its live slots or the limit.
--
-- The bound: after a call at limit L below the capacity, the string holds at most
-- 2 * max(L, live) + 34 slots (else it is shrunk), and live <= the limit of the last admission
-- still inside the window (with times in order an admission at limit L' leaves at most L' live,
-- and only time removes them). At or above the capacity, at most L + 1 slots. So a ring is never
-- larger than twice the largest limit that admitted within the last window or the current one,
-- plus 34 slots (4 bytes each, and the 47-byte header); the capacity, which costs nothing by
-- itself, is at most the largest limit seen since the last shrink.
local function ringCheck(p, now)
  local L, key = p.limit, p.key
  local floor = now - p.window
  p.floor = floor
  local small = RING_HDR + 4 * (L + 1) <= RING_WHOLE_MAX
  local s
  if small then
    s = redis.pcall('GET', key)
  else
    -- The header's bounds as literals: a number argument is formatted into a new string per call.
    -- The header and the slots after it in one read: a ring still growing (a key far under a
    -- large limit) is all there, and one whose gap is near the start needs no second read.
    s = redis.pcall('GETRANGE', key, '0', RING_PREFIX_LAST)
  end
  -- A missing key reads as false (GET) or '' (GETRANGE). The header's fields a decision needs,
  -- inline (top and exp only when it commits, from r.hdr).
  local stored, g0, e, base, ls, le
  if type(s) == 'string' then
    local m, l1, l2, l3, l4, h1, h2, h3, h4, e1, e2, e3, e4, b1, b2, b3, b4, b5, b6 =
      string.byte(s, 1, 19)
    ls, le = string.byte(s, 32, 33)
    if m == RING_MARK and le then
      stored = ((l1 * 256 + l2) * 256 + l3) * 256 + l4
      g0 = ((h1 * 256 + h2) * 256 + h3) * 256 + h4
      e = ((e1 * 256 + e2) * 256 + e3) * 256 + e4
      base = ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6
    end
  end
  -- K: the ring's capacity (L + 1 slots... K + 1), o: the oldest slots this limit does not count.
  local K, o = L, 0
  local N = L + 1
  local r, gap, cd, cf, cn, co, whole, size
  if not stored or stored < L then
    r = ${ringStateTable({ L: "L", o: "0", gap: "0", g0: "0", e: "L", base: "0", top: "0", exp: "0", cf: "0", cn: "N", cd: "''", co: "0", small: "small" })}
    -- When it keeps everything stored (lossless) it is written even if the call is denied (the
    -- report): paid once, the next call reads a ring of this size.
    if stored then
      -- A higher limit: the ring grows to it, its slots kept as they are.
      if not small then s = redis.call('GET', key) end
      codec().ringGrow(r, s, floor, now, p.window)
    else
      -- No ring yet: every slot is empty. It is written as long as it is used (the header, the
      -- times, the gap) and grows with later writes: a client that sends a few requests under a
      -- large limit costs bytes for those few, not for the limit. Another type at the key (the
      -- read's error: a sorted set of the retired sliding-log-zset) reads as no ring too, and
      -- the first admission's SET replaces it.
      r.fresh, r.rebuilt, r.base = true, true, math.max(0, floor)
    end
    gap, base, cd, cf, cn, co = r.gap, r.base, r.cd, r.cf, r.cn, r.co
  else
    K = stored
    N = K + 1
    -- Read whole: by the limit (GET), or a ring still growing that ends within the first read.
    local read = small or #s < RING_PREFIX
    -- Small by its capacity: its header holds no range (ringHeader), its decisions read it whole.
    small = RING_HDR + 4 * N <= RING_WHOLE_MAX
    whole, cd, cf, cn, co = s, s, 0, N, RING_HDR
    if not read then
      -- The string goes on past what was read: the slots read are enough when the gap and the
      -- cost's slots after it (and the report's first probe) are among them. Writes stay inside
      -- the string, so its size need not be known.
      gap = ringGapIn(s, RING_HDR + 1)
      if gap and gap + p.cost + 2 <= RING_PREFIX_SLOTS then
        whole, cn = false, RING_PREFIX_SLOTS
      elseif gap then
        -- The header's g0 is not kept up while the gap is among these slots (commit): the range
        -- is read from where the gap is.
        e, g0, gap, ls = e - (gap - g0) % N, gap, nil, 0
      end
    end
    if read then
      gap = ringGapIn(s, RING_HDR + 1)
      if #s < RING_HDR + 4 * N then size = #s end
    elseif not gap then
      -- The gap is at most GAP_DRIFT slots past g0: one range holds it, the c slots after it and
      -- the one after those (the report's first probe) and, when they are near, the hint's slots,
      -- with room for the gallop: the hint dates from the header's last write, and more slots
      -- have left the window since (READ_SPAN).
      ${READ_SPAN("p.cost")}
      -- A span past the ring's end is read to the end first; the part from slot 0 only when the
      -- gap is there (it has wrapped): most decisions near the end need one read, not two.
      local wraps = from + n > N
      local to = n
      if wraps then to = N - from end
      whole, cf, cn, co = false, from, to, 0
      if p.cost == 1 and ls > 0 then
        -- The header holds this range's offsets as text (ringHeader): no number to format (not
        -- when g0 was moved to the gap found in the first read: ls is 0 then).
        cd = redis.call('GETRANGE', key, string.sub(s, 34, 33 + ls), string.sub(s, 34 + ls, 33 + ls + le))
      else
        cd = redis.call('GETRANGE', key, RING_HDR + 4 * from, RING_HDR + 4 * (from + to) - 1)
      end
      -- A short read: the string ends there (a ring still growing), which its next write must know
      -- (commit: a SETRANGE past a string's end reserves up to twice its length).
      if #cd < 4 * to then size = RING_HDR + 4 * from + #cd end
      gap = ringGapIn(cd, 1)
      -- Also when the gap is near the end and the cost's slots after it (and the report's probe)
      -- go on from slot 0: else each of them would be read alone (one GETRANGE a slot, and a
      -- search of those read so far: a cost of 100 000 after one that filled the ring took
      -- minutes of Redis).
      if wraps and (not gap or gap + p.cost + 2 > to) then
        -- A ring still growing ends early: its missing slots are empty, and the part from slot 0
        -- must land where they end.
        if #cd < 4 * to then cd = cd .. string.rep('\\0', 4 * to - #cd) end
        if n - to <= RING_PREFIX_SLOTS then
          -- Among the slots of the first read.
          cd = cd .. string.sub(s, RING_HDR + 1, RING_HDR + 4 * (n - to))
        else
          cd = cd .. redis.call('GETRANGE', key, RING_HDR, RING_HDR + 4 * (n - to) - 1)
        end
        cn = n
        gap = ringGapIn(cd, 1)
      end
      if gap then
        gap = (from + gap) % N
      else
        -- Not where the header says (only a ring written by something else): read it whole.
        s = redis.call('GET', key)
        whole, cd, cf, cn, co = s, s, 0, N, RING_HDR
        gap = ringGapIn(s, RING_HDR + 1)
        size = nil
        if #s < RING_HDR + 4 * N then size = #s end
      end
    end
    if gap then
      -- The hint was counted from g0's oldest slot: the gap moved on since, over that many slots.
      e = e - (gap - g0) % N
    else
      -- No gap anywhere (only a ring written by something else): rebuilt from its live times.
      r = ${ringStateTable({ L: "K", o: "0", g0: "g0", e: "e", base: "base", small: "small" })}
      local C = codec()
      C.ringBuild(r, C.ringTimes(whole, floor), now, p.window)
      gap, base, cd, cf, cn, co = r.gap, r.base, r.cd, r.cf, r.cn, r.co
    end
    if K > L then
      -- A limit below the capacity: decided on the newest L slots (see above). When its string
      -- holds far more than that, the ring is shrunk to its live slots or the limit, whichever is
      -- more: the frontier (from the header's hint: two slot reads when it is right) says how
      -- many are live.
      r = r or ${STATE}
      if 2 * L + 32 < K then
        -- The string is rewritten smaller when it holds more than twice what it must keep, keep
        -- = max(L, live) slots, plus 32: memory, not capacity, is what a shrink saves (a ring
        -- grown by a higher limit keeps its capacity in a short string, and is left as it is).
        -- First one probe: at most M live, M = (K - 33) / 2, iff (times in order) the slot
        -- before the newest M has left the window. A busy ring under a much lower limit pays
        -- that one slot read a call, not a search or a STRLEN.
        local M = math.floor((K - 33) / 2)
        local v = ringSlot(r, key, K - M - 1)
        if v == 0 or v <= floor - r.base then
          local S = (r.whole and #r.whole) or r.size or redis.call('STRLEN', key)
          S = math.floor((S - RING_HDR) / 4)
          -- Counted as live: also what left the window less than STAMP_AHEAD_MAX ago. With the
          -- Redis clock a slot's time is at most that (a lease's stamp) past any later slot's,
          -- so the search's last slot found that old proves every older one has left: none the
          -- shrink drops can still be inside, out of order, and no slot need be scanned.
          local keep = K - ringFrontier(r, key, K, r.e, floor - ${STAMP_AHEAD_MAX_MS})
          if keep < L then keep = L end
          if 2 * keep + 32 < S then codec().ringShrink(r, key, keep) end
        end
      end
      r.o = r.L - L
      o, N = r.o, r.L + 1
      if o > 0 then
        -- The decision's slots (and the report's first probe after them) in one range, unless
        -- they are among what was read: they are o slots past the gap, not after it.
        local from = (r.gap + 1 + o) % N
        local m = p.cost + 1
        if m > L then m = L end
        if r.cn < N and (from - r.cf) % N + m > r.cn then
          -- What was read stays at hand for the frontier's probes (a range read from slot cf; the
          -- first read's slots are r.hdr's).
          if r.co == 0 then
            r.chunks = r.chunks or {}
            r.chunks[#r.chunks + 1] = { from = r.cf, n = r.cn, data = r.cd }
          end
          -- Past the ring's end it goes on from slot 0 (ringRange): slot cf + k mod N is at k.
          r.cd = codec().ringRange(key, false, N, from, m)
          r.cf, r.cn, r.co = from, m, 0
        end
      end
      gap, base, cd, cf, cn, co = r.gap, r.base, r.cd, r.cf, r.cn, r.co
    end
  end
  local c = p.cost
  -- The ring's state, built only when a later step needs it (commit, report, a slot not in what
  -- was read): a denial the read decides builds none — a table fewer to allocate and collect.
  if c > L then
    p.ring, p.allowed = r or ${STATE}, false
    return
  end
  -- Every slot it would overwrite must have left the window. Also kept for the report: the first
  -- one still inside (the slots before it are free: with times in order, exactly the remaining
  -- capacity), and when a denied cost would fit (the newest of them leaves).
  local first, latest, rel = c, 0, floor - base
  for j = 0, c - 1 do
    local v = 0 -- past the end of a ring still growing: never written
    local k = (gap + 1 + o + j - cf) % N
    if k < cn then
      -- ringSlot, inline, on what was read (its span holds these slots but past the ring's end)
      local a, b, x, d = string.byte(cd, co + 4 * k + 1, co + 4 * k + 4)
      if d then v = ((a * 256 + b) * 256 + x) * 256 + d end
    else
      r = r or ${STATE}
      v = ringSlot(r, key, j)
    end
    if v > 0 and v > rel and j < first then first = j end
    if v > latest then latest = v end
  end
  if first == c and o > 0 then
    -- Its slots are free: so are the older ones the limit does not count, with times in order
    -- (they are older). Out of order (a lease's stamp ahead), one of them may still be inside
    -- the window: a unit this limit counts, so the cost does not fit (stricter, as the ring is
    -- with such times). Their newest slot from what was read; only when it left the window
    -- less than STAMP_AHEAD_MAX ago, the ones before it (ringOlderLive: with the Redis clock a
    -- slot's time is at most that past any later slot's). Inline: a function more is a closure
    -- made on every call of the script.
    r = r or ${STATE}
    local v, read = ringSlot(r, key, -1), nil
    if v == 0 or v <= rel - ${STAMP_AHEAD_MAX_MS} then
      v = nil
    elseif v <= rel then
      v, read = codec().ringOlderLive(r, key, rel, o - 1)
    end
    if v then
      first = 0
      if v > latest then latest = v end
    elseif read and read >= 256 then
      -- Many were read (a burst that left the window only just) and none is inside: they are
      -- dropped now (the ring shrunk to the limit, written with this decision), so no later
      -- call reads them again: that read is paid once per burst, O(1) per unit admitted.
      codec().ringShrink(r, key, L)
      r.o = 0
    end
  end
  p.allowed, p.first = first == c, first
  if first < c then
    p.ring, p.reset = r or false, base + latest + p.window
    return
  end
  p.ring = r or ${STATE}
end
`);
