-- Shared numeric helpers. Every quantity is an integer held in a double; '%.0f' prints one
-- exactly (tostring would switch to exponent notation past 1e14 and lose digits).

local NEVER = math.huge

local function fmt(n)
  return string.format('%.0f', n)
end

local function gcd(a, b)
  while b ~= 0 do
    a, b = b, a % b
  end
  return a
end
