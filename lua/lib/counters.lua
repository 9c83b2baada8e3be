-- State of the counter algorithms: one string per key, in one of two forms.
--
-- Compact, for a rule of one window: the entry's numbers n1 … nk as one run of digits, n1 then
-- n2 … nk, then one length digit for each of n2 … nk (n1's length is what is left). n1 is a time
-- in ms, the others are at most 9 digits: a fixed window ending at 1763700060000 with a count of
-- 42 is 1763700060000 42 2 → 1763700060000422. Redis stores a canonical decimal of at most 19 digits
-- below 2^63 as an integer (OBJECT ENCODING int): on Redis 7.0, `tg:r:{ip:10.0.12.123}:fw` then
-- takes 72 bytes instead of 104 as a string. A 13-digit time leaves 6 digits for the rest; a
-- longer run is still read right, it only costs as much as a string.
--
-- For fixed and sliding windows n1 is the key's own expiry: every write sets it as the TTL, so a
-- write that keeps n1 (a charge within the window) keeps the TTL with a cheaper SET … KEEPTTL,
-- and no period edited since the key was written can make that wrong.
--
-- Textual, `period v1 v2 … period v1 v2 …`: any number of windows, any values. Entries are looked
-- up by period, so a rule whose windows change keeps the state of the periods it still has and
-- starts the new ones fresh. It always holds a space, which tells the two forms apart.
--
-- A compact state read by a rule that now has several windows goes to its first window: after an
-- edit from one window to many, the first window carries on and the others start fresh.

local MAX_PACKED = 999999999
-- Length digits as strings: concatenating a number would format it on every write.
local LENGTH_DIGITS = { '1', '2', '3', '4', '5', '6', '7', '8', '9' }

local function packable(n)
  return n >= 0 and n <= MAX_PACKED and n == floor(n)
end

-- The digits of the entry's two or three numbers, or nil when one is not a whole number ≥ 0
-- (fmt would print a point or a sign) or a later one has more digits than a length digit can
-- say. No tables: this runs on every write.
local function pack_digits(first, second, third)
  if first < 0 or first ~= floor(first) or not packable(second) then
    return nil
  end
  local b = fmt(second)
  if third == nil then
    return fmt(first) .. b .. LENGTH_DIGITS[#b]
  end
  if not packable(third) then
    return nil
  end
  local c = fmt(third)
  return fmt(first) .. b .. c .. LENGTH_DIGITS[#b] .. LENGTH_DIGITS[#c]
end

-- Pieces go through tonumber one by one: the whole run has more digits than a double (2^53) keeps.
local function unpack_digits(raw, arity)
  local n = #raw
  if arity == 2 then
    local size = string.byte(raw, n) - 48
    return tonumber(string.sub(raw, 1, n - 1 - size)), tonumber(string.sub(raw, n - size, n - 1))
  end
  local size2, size3 = string.byte(raw, n - 1, n)
  size2, size3 = size2 - 48, size3 - 48
  local stop = n - 2 - size3
  return tonumber(string.sub(raw, 1, stop - size2)),
    tonumber(string.sub(raw, stop - size2 + 1, stop)),
    tonumber(string.sub(raw, stop + 1, n - 2))
end
