import { MAX_WEIGHTED_ENTRIES } from "../caps";

/**
 * The weighted log's codec (weighted-log.lua.ts has the layout and why): the v2 header, the
 * entries, BITFIELD packing, and the v1 reader a deployment upgrading still meets.
 *
 * v2: a 30-byte header at byte 0, big-endian (what BITFIELD reads and writes): magic (2 bytes,
 * 0xFE 'W': no text layout starts with 0xFE, and never 0, which a BITFIELD on an absent key
 * reads), start (u32: bytes of entries before the first live one), end (u32: bytes of entries),
 * n (u32: live entries), sum (i64: their units), exp (i64: the store-clock time the TTL was last
 * set to end); then the entries, nothing after them. sum and exp stay below 2^53: exact in Lua's
 * doubles, encoded by hand (Upstash's Lua may lack the struct library).
 *
 * v1: the entries, then a 58-character text trailer (`|W` sum, count, start, expiry, end). Read
 * only: an admission writes such a log whole as v2; a settle or a refund rewrites it as v1 did.
 */
export const WL_CODEC = `
-- The most admissions one log holds in its window.
local WL_MAX = ${MAX_WEIGHTED_ENTRIES}
-- The most units the log's sum holds: below 2^53 (exact in Lua's doubles).
local WL_SUM_MAX = 9000000000000000
-- The most units one entry holds: its 13 digits (usage is capped far below, caps.ts).
local WL_UNITS_MAX = 9999999999999
local WL_MAGIC = string.char(254, 87)
-- The magic as BITFIELD GET u16 0 reads it.
local WL_MAGIC_U16 = 65111
local WL_HDR = 30
-- v1's trailer: '|W', sum (16 digits), count (6), start (9), expiry (15), end (10).
local WL_TL = 58
-- Bytes read at a time: a log this short is read whole, in one command.
local WL_READ = 8192
-- Longer than any entry: a range read for one ends at least this far past its start.
local WL_EMAX = 160
local WL_ENTRY = '^[^,;|]*,(%d+),(%d+),([rsx]);()'

-- The big-endian unsigned number of \`k\` bytes at \`i\` of \`s\`, and back.
local function wl_num(s, i, k)
  local x = 0
  for j = i, i + k - 1 do x = x * 256 + string.byte(s, j) end
  return x
end
local function wl_bytes(x, k)
  local t = {}
  for j = k, 1, -1 do
    t[j] = x % 256
    x = (x - t[j]) / 256
  end
  return string.char(unpack(t))
end

local function wl_header(start, last, n, sum, exp)
  return WL_MAGIC .. wl_bytes(start, 4) .. wl_bytes(last, 4) .. wl_bytes(n, 4) ..
    wl_bytes(sum, 8) .. wl_bytes(exp, 8)
end

-- BITFIELD operations appended to \`a\`: SET \`bytes\` at position \`at\` (1-based), or (bytes a
-- length) GET that many, in u32 chunks and a u8/u16/u24 tail: each value < 2^32, exact.
local function wl_ops(a, op, at, bytes)
  local len = type(bytes) == 'number' and bytes or #bytes
  local i = 1
  while i <= len do
    local k = math.min(4, len - i + 1)
    a[#a + 1], a[#a + 2], a[#a + 3] = op, 'u' .. (8 * k), int((at + i - 2) * 8)
    if op == 'SET' then a[#a + 1] = int(wl_num(bytes, i, k)) end
    i = i + k
  end
  return a
end
-- The \`len\` bytes BITFIELD's reply \`r\` holds from \`i\` on (as wl_ops chunked them), and the
-- index after them.
local function wl_got(r, i, len)
  local t = {}
  while len > 0 do
    local k = math.min(4, len)
    t[#t + 1], i, len = wl_bytes(r[i], k), i + 1, len - k
  end
  return table.concat(t), i
end

-- A log as read so far: \`s\` holds its bytes from \`off\` + 1 on (absolute, 1-based), \`pos\` is
-- where the live entries start, \`last\` where the entries end, \`hdr\` the bytes before the
-- entries (v2's header; 0 for v1), \`ver\` 2, 1 or nil (absent, or not this log: empty).
local function wl_v2(key, s, off, h)
  return { key = key, s = s, off = off, ver = 2, hdr = WL_HDR, pos = WL_HDR + wl_num(h, 3, 4) + 1,
    last = WL_HDR + wl_num(h, 7, 4), n = wl_num(h, 11, 4), sum = wl_num(h, 15, 8),
    exp = wl_num(h, 23, 8) }
end
local function wl_v1(key, s, off, t)
  local v = { key = key, s = s, off = off, last = 0, sum = 0, n = 0, pos = 1, exp = 0, hdr = 0 }
  if t and #t == WL_TL and string.match(t, '^|W%d+$') then
    v.sum, v.n = tonumber(string.sub(t, 3, 18)), tonumber(string.sub(t, 19, 24))
    v.pos, v.exp = tonumber(string.sub(t, 25, 33)) + 1, tonumber(string.sub(t, 34, 48))
    v.last, v.ver = tonumber(string.sub(t, 49, 58)), 1
  else
    v.s, v.off = '', 0
  end
  return v
end
local function wl_is2(s) return #s >= WL_HDR and string.sub(s, 1, 2) == WL_MAGIC end

-- Reads a log from its start (an admission: the header and the oldest entries, one GETRANGE),
-- or from its end (a settle's search: the newest). v1 keeps its trailer at the end: a long v1
-- log costs an admission a second read (once: it is written back as v2).
local function wl_open(key, fromEnd)
  if not fromEnd then
    local s = redis.call('GETRANGE', key, 0, WL_READ - 1)
    if wl_is2(s) then return wl_v2(key, s, 0, s) end
    if #s < WL_READ then return wl_v1(key, s, 0, string.sub(s, -WL_TL)) end
    return wl_v1(key, s, 0, redis.call('GETRANGE', key, -WL_TL, -1))
  end
  local s = redis.call('GETRANGE', key, -WL_READ, -1)
  if #s < WL_READ then
    if wl_is2(s) then return wl_v2(key, s, 0, s) end
    return wl_v1(key, s, 0, string.sub(s, -WL_TL))
  end
  local v = wl_v1(key, s, 0, string.sub(s, -WL_TL))
  if v.ver then
    v.off = v.last + WL_TL - WL_READ
    return v
  end
  local h = redis.call('GETRANGE', key, 0, WL_HDR - 1)
  if not wl_is2(h) then return v end
  v = wl_v2(key, s, 0, h)
  v.off = v.last - WL_READ
  return v
end

-- The entry at \`pos\` (absolute): its time, units, state and where the next starts; nil past the
-- entries. Reads on from \`pos\` when what is held ends too soon.
local function wl_next(v, pos)
  if pos > v.last then return nil end
  local rel = pos - v.off
  if rel < 1 or (rel + WL_EMAX > #v.s and v.off + #v.s < v.last) then
    v.s, v.off, rel = redis.call('GETRANGE', v.key, pos - 1, pos + WL_READ - 2), pos - 1, 1
  end
  local t, u, state, nxt = string.match(v.s, WL_ENTRY, rel)
  if not t then return nil end
  return tonumber(t), tonumber(u), state, nxt + v.off
end

local function wl_entry(member, t, units, state)
  return member .. ',' .. string.format('%013.0f', t) .. ',' .. string.format('%013.0f', units) ..
    ',' .. state .. ';'
end
`;

/**
 * The settle's and refund's search and in-place rewrite (only the scripts that refund define
 * them: every function a script defines is made again on each EVALSHA).
 */
export const WL_FIND = `
-- Where \`member\`'s live entry starts (absolute), its time, units, state and the byte after it;
-- nil when it is not there. Searched back from the newest, in ranges that double (a settle soon
-- after its admission finds it among the few admitted since: one read).
local function wl_find(v, member)
  local needle, size = member .. ',', math.max(#v.s, WL_READ)
  while true do
    local from = math.max(v.pos - v.off, 1)
    while true do
      local at = string.find(v.s, needle, from, true)
      if not at or at + v.off > v.last then break end
      local abs = at + v.off
      if abs == v.pos or (at > 1 and string.sub(v.s, at - 1, at - 1) == ';') then
        local t, u, state, nxt = string.match(v.s, WL_ENTRY, at)
        if t then return abs, tonumber(t), tonumber(u), state, nxt + v.off end
      end
      from = at + 1
    end
    -- What was read holds every live entry: not there.
    if v.off < v.pos then return nil end
    size = 2 * size
    local first = math.max(v.pos, v.last - size + 1)
    v.s, v.off = redis.call('GETRANGE', v.key, first - 1, v.last - 1), first - 1
  end
end

-- The entry at \`at\` (ending before \`nxt\`) takes \`units\` and \`state\`, the log's sum \`sum\`.
-- v2: one BITFIELD (the units digits, the state byte, the header's sum). v1: one SETRANGE of the
-- entry rewritten, the entries after it and the trailer.
local function wl_patch(v, at, nxt, member, t, units, state, sum)
  if v.ver == 2 then
    local ua = at + #member + 15
    local a = wl_ops({}, 'SET', ua, string.format('%013.0f', units))
    a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = 'SET', 'u8', int((ua + 13) * 8), string.byte(state)
    a[#a + 1], a[#a + 2], a[#a + 3], a[#a + 4] = 'SET', 'i64', 112, int(sum)
    redis.call('BITFIELD', v.key, unpack(a))
    return
  end
  local after = string.sub(v.s, nxt - v.off, v.last - v.off)
  local trailer = string.format('|W%016.0f%06d%09d%015.0f%010d', sum, v.n, v.pos - 1, v.exp, v.last)
  redis.call('SETRANGE', v.key, at - 1, wl_entry(member, t, units, state) .. after .. trailer)
end
`;
