-- Shared numeric helpers. Every quantity is an integer held in a double; '%.0f' prints any one
-- exactly, tostring only those below 1e14 (past it, exponent notation loses digits).

local NEVER = math.huge
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min

-- Formatting is most of what a write costs, and the numbers of one batch repeat (window starts,
-- periods, small counts): each is formatted once per script call. tostring costs half of
-- string.format; 0 is spelled out because tostring(-0) is '-0'.
local formatted = {}

local function fmt(n)
  local text = formatted[n]
  if text then
    return text
  end
  if n == 0 then
    text = '0'
  elseif n < 1e14 and n > -1e14 then
    text = tostring(n)
  else
    text = string.format('%.0f', n)
  end
  -- NaN cannot be a table key; it is never a quantity here, but must not become an error.
  if n == n then
    formatted[n] = text
  end
  return text
end

local function gcd(a, b)
  while b ~= 0 do
    a, b = b, a % b
  end
  return a
end
