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

-- The largest integer a double holds exactly, and every count's bound.
local MAX_EXACT = 9007199254740991
-- Lua's % is a - floor(a / b) * b, which rounds once a / b nears 2^53 / b; C's fmod is exact.
local fmod = math.fmod

local function gcd(a, b)
  while b ~= 0 do
    a, b = b, fmod(a, b)
  end
  return a
end

-- ceil(a * o / p) for integers 0 <= a < 2^53, 0 <= o <= p <= 2^35, exact: past 2^53 the product
-- is split (2^17 = 131072) so that no partial product passes it. Mirrors algorithms/ratios.ts.
local function ceil_ratio(a, o, p)
  local product = a * o
  if product <= MAX_EXACT then
    return ceil(product / p)
  end
  local ra = fmod(a, p)
  local low = fmod(o, 131072)
  local x = ra * ((o - low) / 131072)
  local rx = fmod(x, p)
  local y = rx * 131072 + ra * low
  local ry = fmod(y, p)
  local up = 0
  if ry > 0 then
    up = 1
  end
  return ((a - ra) / p) * o + ((x - rx) / p) * 131072 + (y - ry) / p + up
end

-- The largest o in [0, p] with a * o <= r * p, i.e. floor(r * p / a), for 0 <= r < a < 2^53.
local function largest_within(a, r, p)
  local product = r * p
  if product <= MAX_EXACT then
    return floor(product / a)
  end
  local o = min(p, floor((r / a) * p))
  while o < p and ceil_ratio(a, o + 1, p) <= r do
    o = o + 1
  end
  while o > 0 and ceil_ratio(a, o, p) > r do
    o = o - 1
  end
  return o
end
