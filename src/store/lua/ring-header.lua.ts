/**
 * The ring's header as Lua (ring-codec.lua.ts has the layout, byte by byte): decoding its fields
 * and encoding it whole, members of the codec table that only rebuilds, resizes and header
 * writes call; and READ_SPAN, the range of slots a decision reads first, which the header
 * stores as text and the check reads (ring-reads.lua.ts).
 */
/**
 * The range of slots a decision of cost `cost` reads (Lua statements setting locals `from`, the
 * first physical slot, and `n`, how many; over the header's g0 and e and the ring's N). From g0:
 * the gap (at most GAP_DRIFT slots on), the cost's slots and the one after (the report's first
 * probe). Then the hint's slots, where the frontier search starts, when they are near: forward
 * for a ring mostly in use (the hint a few slots past the oldest), backward for one mostly free
 * (its slots still inside the window sit just before the gap, and the hint among them). One
 * expression for the header's write of it and the read, which must agree.
 */
export const READ_SPAN = (cost: string) =>
  `local from, n = g0, GAP_DRIFT + ${cost} + 2
  if e + 16 <= 256 and e + 16 > n then n = e + 16 end
  -- The hint's first probe, logical e - 1, is physical g0 + e: back to one slot before it.
  local back = N + 1 - e
  if back > 0 and back + n <= 256 then from, n = (g0 - back) % N, n + back end
  if n > N then from, n = g0, N end`;

/** Members of the codec table (ring-codec.lua.ts's codec()), composed in its place there. */
export const RING_HEADER_LUA = `  -- L, g0, e, base, top, exp of a ring's header, and the lengths of its read range's two offsets as
  -- text (0: none); nil if s does not start with one.
  function C.ringFields(s)
    local m, l1, l2, l3, l4, h1, h2, h3, h4, e1, e2, e3, e4, b1, b2, b3, b4, b5, b6,
      t1, t2, t3, t4, t5, t6, x1, x2, x3, x4, x5, x6, ls, le = string.byte(s, 1, 33)
    if m ~= RING_MARK or not le then return nil end
    return ((l1 * 256 + l2) * 256 + l3) * 256 + l4, ((h1 * 256 + h2) * 256 + h3) * 256 + h4,
      ((e1 * 256 + e2) * 256 + e3) * 256 + e4,
      ((((b1 * 256 + b2) * 256 + b3) * 256 + b4) * 256 + b5) * 256 + b6,
      ((((t1 * 256 + t2) * 256 + t3) * 256 + t4) * 256 + t5) * 256 + t6,
      ((((x1 * 256 + x2) * 256 + x3) * 256 + x4) * 256 + x5) * 256 + x6, ls, le
  end
  -- Arithmetic, not math.floor: a C call per byte costs more than the division (values are integers).
  function C.p32(v)
    local d = v % 256
    v = (v - d) / 256
    local c = v % 256
    v = (v - c) / 256
    local b = v % 256
    return string.char((v - b) / 256, b, c, d)
  end
  function C.ringHeader(r)
    local L, h, e, b, t, x = r.L, r.g0, r.e, r.base, r.top, r.exp
    local l4 = L % 256; L = (L - l4) / 256
    local l3 = L % 256; L = (L - l3) / 256
    local l2 = L % 256; L = (L - l2) / 256
    local h4 = h % 256; h = (h - h4) / 256
    local h3 = h % 256; h = (h - h3) / 256
    local h2 = h % 256; h = (h - h2) / 256
    local e4 = e % 256; e = (e - e4) / 256
    local e3 = e % 256; e = (e - e3) / 256
    local e2 = e % 256; e = (e - e2) / 256
    local b6 = b % 256; b = (b - b6) / 256
    local b5 = b % 256; b = (b - b5) / 256
    local b4 = b % 256; b = (b - b4) / 256
    local b3 = b % 256; b = (b - b3) / 256
    local b2 = b % 256; b = (b - b2) / 256
    local t6 = t % 256; t = (t - t6) / 256
    local t5 = t % 256; t = (t - t5) / 256
    local t4 = t % 256; t = (t - t4) / 256
    local t3 = t % 256; t = (t - t3) / 256
    local t2 = t % 256; t = (t - t2) / 256
    local x6 = x % 256; x = (x - x6) / 256
    local x5 = x % 256; x = (x - x5) / 256
    local x4 = x % 256; x = (x - x4) / 256
    local x3 = x % 256; x = (x - x3) / 256
    local x2 = x % 256; x = (x - x2) / 256
    local fields = string.char(RING_MARK, L, l2, l3, l4, h, h2, h3, h4, e, e2, e3, e4,
      b, b2, b3, b4, b5, b6, t, t2, t3, t4, t5, t6, x, x2, x3, x4, x5, x6)
    -- The byte offsets a decision of cost 1 reads first (GETRANGE), as text: a number argument to
    -- redis.call is formatted into a string on every call (~0.18 µs each, measured), these only
    -- when the header is written. A span past the ring's end is read to its end first.
    local N, g0 = r.L + 1, r.g0
    -- A ring read whole (GET) reads no range.
    if RING_HDR + 4 * N <= RING_WHOLE_MAX then return fields .. '\\0\\0' .. string.rep(' ', 14) end
    e = r.e
    ${READ_SPAN("1")}
    if from + n > N then n = N - from end
    local first = string.format('%d', RING_HDR + 4 * from)
    local last = string.format('%d', RING_HDR + 4 * (from + n) - 1)
    return fields .. string.char(#first, #last) .. first .. last .. string.rep(' ', 14 - #first - #last)
  end
`;
