-- Shared numeric helpers. Every quantity is an integer held in a double, which '%.0f' prints
-- exactly (tostring only below 1e14: past it, exponent notation loses digits).

local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
-- Globals cost a table lookup on every use: the hot ones are held in locals.
local call, tonumber = redis.call, tonumber
local find, sub, byte = string.find, string.sub, string.byte

-- Formatting is most of what a write costs, and the numbers of one batch repeat (window ends,
-- periods, small counts): each is formatted once per script call. 0 is spelled out because
-- '%.0f' prints -0 as '-0'.
local formatted = {}

local function fmt(n)
  local text = formatted[n]
  if text then
    return text
  end
  if n == 0 then
    text = '0'
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
-- A remaining count this close to 2^53 goes into the reply as text: a RESP3 client (ioredis 6)
-- reads an integer reply digit by digit through a sum that passes 2^53 and rounds it. Times stay
-- far below it.
local WIRE_EXACT = MAX_EXACT - 128

-- Appends one window's answer after reply[n] (decide.lua's reply) and returns the new length.
local function append_window(reply, n, remaining, reset_at, fits_at)
  if remaining > WIRE_EXACT then
    remaining = fmt(remaining)
  end
  reply[n + 1], reply[n + 2], reply[n + 3] = remaining, reset_at, fits_at
  return n + 3
end
-- Lua's % is a - floor(a / b) * b, which rounds once a / b nears 2^53 / b; C's fmod is exact.
-- For a time a (at most 8.64e15, clock.ts) and a period b, a / b is still floored exactly, as in
-- the TypeScript models' Math.floor(now / period): there % is exact, and costs no function call.
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
