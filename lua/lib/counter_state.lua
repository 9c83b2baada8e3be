-- State of the counter algorithms (fixed window, sliding window, bucket): one string per key.
-- Each algorithm keeps the same fields per window in one of three encodings (its file names
-- them; packages/core/src/stores/shared/redis-state.ts decodes them):
--
-- Compact, for a rule of one window whose fields fit: the fields f1 … fk as one run of digits,
-- f1 then f2 … fk, then one length digit for each of f2 … fk (f1's length is what is left). f1 is
-- a time in ms, the others at most 9 digits: a bucket measured at 1763700059710 with a deficit
-- of 600 is 1763700059710 600 3 → 17637000597106003. Redis keeps a canonical decimal of at most 19
-- digits below 2^63 as an integer (OBJECT ENCODING int), which takes less memory than a string.
-- A longer run is still read right; it only costs as much as a string.
--
-- Addable, for a rule of one window whose two fields are a time in whole seconds (f1) and a
-- count below 1,000,000 (f2): the negative integer -(f1 / 1000 × 1000000 + f2). A fixed window
-- ending at 1763700060000 with a count of 42 is -1763700060000042. A sync adds a process's units
-- to it with one DECRBY, which answers the value after, and needs no read and no write of its
-- own (fixed_window.lua). Its magnitude stays below 2^53, so a script reads DECRBY's answer
-- exactly; a compact value is never negative, so the sign tells the two apart.
--
-- Text, for any number of windows and any values: `period:f1:f2… ` for each window that has
-- fields, in the rule's order, every entry ended by a space: a value holds a space if and only
-- if it is text, which one find tells. Entries are found by period, so a rule whose windows
-- change keeps the state of the periods it still has and starts new ones fresh.
--
-- A compact or addable value holds no period: read by a rule of several windows, it goes to the
-- first window. Its fields are times and counts, never window indices, so that after an edit of the
-- period they still say when the state ends.
--
-- Version 0.1.0 wrote the text form as `period v1 v2 …`, with other fields (see each algorithm's
-- file): a value holding a space but no ':' is read in that layout and written back in this one.

local MAX_PACKED = 999999999
-- The addable form's bound on its count, and on its time: s × 1000000 + count stays below 2^53.
local ADDABLE = 1000000
local ADDABLE_ENDS_BEFORE = 9000000000000

-- Whether a time (ms) can be the addable form's f1: whole seconds, within its bound.
local function addable_time(time)
  return time > 0 and time % 1000 == 0 and time < ADDABLE_ENDS_BEFORE
end
-- Length digits as strings: concatenating a number would format it on every write.
local LENGTH_DIGITS = { '1', '2', '3', '4', '5', '6', '7', '8', '9' }

-- Reads the text form's entries into s, window k's fields at at + (k - 1) × arity + 1 onwards.
-- `inner` separates an entry's numbers: ':', or ' ' in 0.1.0's layout, whose fields
-- `legacy(w, v1, v2, v3)` turns into this one's. Plain finds: gmatch would build an iterator and
-- a capture per number.
local function read_text(raw, windows, s, at, arity, inner, legacy)
  local position, size, count = 1, #raw, #windows
  while position <= size do
    local stop = find(raw, inner, position, true)
    local period = tonumber(sub(raw, position, stop - 1))
    position = stop + 1
    stop = find(raw, inner, position, true)
    local a = tonumber(sub(raw, position, stop - 1))
    position = stop + 1
    local b, c
    if arity == 3 then
      stop = find(raw, inner, position, true)
      b = tonumber(sub(raw, position, stop - 1))
      position = stop + 1
      stop = find(raw, ' ', position, true) or size + 1
      c = tonumber(sub(raw, position, stop - 1))
    else
      stop = find(raw, ' ', position, true) or size + 1
      b = tonumber(sub(raw, position, stop - 1))
    end
    for k = 1, count do
      local w = windows[k]
      if w.period == period then
        local i = at + (k - 1) * arity
        if inner == ' ' then
          a, b, c = legacy(w, a, b, c)
        end
        s[i + 1], s[i + 2] = a, b
        if arity == 3 then
          s[i + 3] = c
        end
      end
    end
    position = stop + 1
  end
end

-- Reads a key's value `raw` (GET's answer) into s, window k's fields at at + (k - 1) × arity + 1
-- onwards (read_counter: the key's); a window that has none gets a nil f1, and whatever its other cells held is never read. Returns f1 when the
-- value was compact (a write that keeps f1 may keep the TTL), else false. A compact value's
-- pieces go through tonumber one by one: the whole run has more digits than a double (2^53) keeps.
local function parse_counter(raw, windows, s, at, arity, legacy)
  local last = at + #windows * arity
  if raw and not find(raw, ' ', 1, true) then
    local n, first = #raw, nil
    -- '-' is byte 45: the addable form, read whole (its magnitude is below 2^53).
    if arity == 2 and byte(raw, 1) == 45 then
      local v = -tonumber(raw)
      local second = fmod(v, ADDABLE)
      first = (v - second) / ADDABLE * 1000
      s[at + 1], s[at + 2] = first, second
    elseif arity == 2 then
      -- '0' is byte 48.
      local size = byte(raw, n) - 48
      first = tonumber(sub(raw, 1, n - 1 - size))
      s[at + 1], s[at + 2] = first, tonumber(sub(raw, n - size, n - 1))
    else
      local size2, size3 = byte(raw, n - 1, n)
      size2, size3 = size2 - 48, size3 - 48
      local stop = n - 2 - size3
      first = tonumber(sub(raw, 1, stop - size2))
      s[at + 1], s[at + 2], s[at + 3] = first, tonumber(sub(raw, stop - size2 + 1, stop)), tonumber(sub(raw, stop + 1, n - 2))
    end
    for i = at + arity + 1, last, arity do
      s[i] = nil
    end
    return first
  end
  for i = at + 1, last, arity do
    s[i] = nil
  end
  if raw then
    if find(raw, ':', 1, true) then
      read_text(raw, windows, s, at, arity, ':', legacy)
    else
      read_text(raw, windows, s, at, arity, ' ', legacy)
    end
  end
  return false
end

local function read_counter(key, windows, s, at, arity, legacy)
  return parse_counter(call('GET', key), windows, s, at, arity, legacy)
end

-- Writes the fields held from at + 1 on and returns the value written (false: deleted), the key
-- expiring at `expires_at` (deleted if that has come): compact for one window when the fields are whole numbers ≥ 0 (else fmt would print a
-- point or a sign) and all but f1 have at most 9 digits, else text. `kept` is a compact f1 read
-- that is also the key's expiry: a compact write with the same f1 keeps the TTL as it is.
-- `absent`: the key was read with MGET, which answers nil for a key of another type as for none,
-- so it is written only if it does not exist (NX) and never deleted; a key of another type then
-- fails with what GET says of it, as when it is read alone.
local function write_counter(key, windows, s, at, arity, expires_at, now, kept, absent)
  local ttl = expires_at - now
  if ttl <= 0 then
    if not absent then
      call('DEL', key)
    end
    return false
  end
  local count, value = #windows, nil
  if count == 1 then
    local first, second = s[at + 1], s[at + 2]
    if first >= 0 and first % 1 == 0 and second >= 0 and second <= MAX_PACKED and second % 1 == 0 then
      local b = fmt(second)
      if arity == 2 and second < ADDABLE and addable_time(first) then
        value = fmt(-(first / 1000 * ADDABLE + second))
      elseif arity == 2 then
        value = fmt(first) .. b .. LENGTH_DIGITS[#b]
      else
        local third = s[at + 3]
        if third >= 0 and third <= MAX_PACKED and third % 1 == 0 then
          local c = fmt(third)
          value = fmt(first) .. b .. c .. LENGTH_DIGITS[#b] .. LENGTH_DIGITS[#c]
        end
      end
      if value and kept == first then
        call('SET', key, value, 'KEEPTTL')
        return value
      end
    end
  end
  if not value then
    value = ''
    for k = 1, count do
      local i = at + (k - 1) * arity
      if s[i + 1] ~= nil then
        if arity == 2 then
          value = value .. fmt(windows[k].period) .. ':' .. fmt(s[i + 1]) .. ':' .. fmt(s[i + 2]) .. ' '
        else
          value = value .. fmt(windows[k].period) .. ':' .. fmt(s[i + 1]) .. ':' .. fmt(s[i + 2]) .. ':' .. fmt(s[i + 3]) .. ' '
        end
      end
    end
  end
  -- Redis prints a number argument with '%.17g', exact for any integer a double holds.
  if absent then
    if not call('SET', key, value, 'PX', ttl, 'NX') then
      call('GET', key)
    end
    return value
  end
  call('SET', key, value, 'PX', ttl)
  return value
end

-- A sync's segments (`at, units, …`, each at clamped to now) added window by window by
-- `add(k, at, units)`, which answers the units it pushed above window k's limit. A segment's
-- units above a limit count once, however many of its windows they pass: returns their sum.
local function add_segments(windows, now, segments, add)
  local over = 0
  for j = 1, #segments, 2 do
    local at, units = min(segments[j], now), segments[j + 1]
    local above = 0
    for k = 1, #windows do
      local past = add(k, at, units)
      if past > above then
        above = past
      end
    end
    over = over + above
  end
  return over
end

-- Of `units` pushed into a window that then holds `used` of `limit`: the part above the limit.
local function pushed_above(units, used, limit)
  if units <= 0 or used <= limit then
    return 0
  end
  return min(units, used - limit)
end
