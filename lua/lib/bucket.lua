-- Continuous bucket behind token-bucket and gcra: per window, {level, measured at}.
-- Mirrors algorithms/bucket.ts. The level counts 1/(period/g) of a token, g = gcd(limit,
-- period), so a millisecond refills a whole number of units and comparisons stay exact.
-- Compact form (counters.lua): the time measured, then the deficit, the capacity less the level:
-- small while the bucket is nearly full, as it is for most keys, where the level itself would
-- take all the digits of a large capacity (a limit in the billions). The level's unit depends on
-- the window's limit and period, so after an edit of those a carried-over level is approximate;
-- reads clamp it to the capacity, and a level is never negative, so it cannot turn into a
-- negative remaining.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function bucket_module()
  local steps = { arity = 2 }

  -- Units per token, units refilled per ms, and the capacity in units; kept on the window. Past
  -- 2^53 - 1 units a token is floor((2^53 - 1) / limit) units and a ms refills ceil(capacity /
  -- period): exactly `limit` tokens, refilled at most 2 * period / (2^53 - 1) fast (bucket.ts).
  local function scale(w)
    if not w.per_token then
      local limit, period = w.limit, w.period
      local g = gcd(limit, period)
      local exact = (limit / g) * period
      if exact <= MAX_EXACT then
        w.per_token, w.per_ms, w.capacity = period / g, limit / g, exact
      else
        local per_token = floor(MAX_EXACT / limit)
        w.per_token, w.capacity = per_token, limit * per_token
        w.per_ms = ceil(w.capacity / period)
      end
    end
    return w.per_token, w.per_ms, w.capacity
  end

  -- A measurement a faster clock stamped after now is taken as made now.
  function steps.clamp(_, now, level, at)
    if at > now then
      return level, now
    end
    return level, at
  end

  -- A measurement from a faster clock is not refilled backwards.
  function steps.current(w, now, level, at)
    local _, per_ms, capacity = scale(w)
    if level == nil then
      return capacity, now
    end
    local measured = max(now, at)
    return min(capacity, level + (measured - at) * per_ms), measured
  end

  function steps.fits(w, now, need, level, at)
    if need > w.limit then
      return NEVER
    end
    local per_token, per_ms = scale(w)
    local deficit = need * per_token - level
    if deficit <= 0 then
      return now
    end
    return at + ceil(deficit / per_ms)
  end

  function steps.remaining(w, _, level)
    return floor(level / scale(w))
  end

  function steps.charge(w, _, cost, level, at)
    return level - cost * scale(w), at
  end

  function steps.refund(w, _, cost, level, at)
    local per_token, _, capacity = scale(w)
    return min(capacity, level + cost * per_token), at
  end

  -- Tokens taken at `now` go back whenever the undo runs: the level is measured from the later
  -- of `now` and the last measurement, so no refill is counted twice.
  function steps.undo(w, now, cost, level, at)
    return steps.refund(w, now, cost, steps.current(w, now, level, at))
  end

  function steps.expires(w, level, at)
    local _, per_ms, capacity = scale(w)
    return at + ceil((capacity - level) / per_ms)
  end

  function steps.from_compact(w, at, deficit)
    local _, _, capacity = scale(w)
    return max(0, capacity - deficit), at
  end

  function steps.to_compact(w, level, at)
    local _, _, capacity = scale(w)
    return at, capacity - level
  end

  -- The one-window decision by hand (see counter_module.lua): the steps above, inlined.
  function steps.one(key, w, now, cost, peek, reply, n, raw)
    local per_token, per_ms, capacity = scale(w)
    local fits = steps.fits
    local level, at, ahead = capacity, now, false
    if raw then
      local stored_at, deficit = unpack_digits(raw, 2)
      level = max(0, capacity - deficit)
      if stored_at > now then
        -- Measured by a faster clock: taken as measured now, and so written back.
        ahead = true
      else
        level = min(capacity, level + (now - stored_at) * per_ms)
      end
    end
    local fits_now = fits(w, now, cost, level, at)
    local allowed = fits_now == now
    local charging = allowed and cost > 0 and not peek
    if charging or ahead then
      if charging then
        level = level - cost * per_token
      end
      local expiry = at + ceil((capacity - level) / per_ms)
      if expiry <= now then
        redis.call('DEL', key)
      else
        local value = pack_digits(at, capacity - level) or (fmt(w.period) .. ' ' .. fmt(level) .. ' ' .. fmt(at))
        redis.call('SET', key, value, 'PX', expiry - now)
      end
      fits_now = fits(w, now, cost, level, at)
    end
    local remaining, reset_at = floor(level / per_token), now
    if remaining < w.limit then
      reset_at = fits(w, now, remaining + 1, level, at)
    end
    return append_one(reply, n, allowed, now, remaining, reset_at, fits_now)
  end

  return counter_module(steps)
end
