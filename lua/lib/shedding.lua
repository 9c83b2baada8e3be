-- Probabilistic shedding between a window's low_burst and its limit (algorithms/shedding.ts). A
-- request that fits, leaving the window's use at u units after its cost, is dropped with
-- probability (u - low_burst) / (limit - low_burst) when u > low_burst: when the decision's random
-- number r is below that. Compared as r * (limit - low_burst) < u - low_burst in the algorithm's
-- steps (`per` to a unit: a bucket's fill is fractional), so that every operand but r's product
-- is an exact integer and the product one IEEE rounding, as in JavaScript: the same r drops the
-- same requests on both sides.

-- Whether window w, which has a low_burst and holds `used` steps before the request, drops it.
-- The request fits, so used + cost * per is at most the limit's steps: no sum passes 2^53.
local function drops(w, used, per, cost, random)
  local low = w.low_burst
  return random * ((w.limit - low) * per) < used + (cost - low) * per
end

-- What a shed window's fits_at answers for: the cost that fits once the window's use after the
-- request's cost is at most low_burst (the limit, for a cost above low_burst).
local function shed_need(w, cost)
  return min(w.limit, cost + w.limit - w.low_burst)
end
