-- Continuous bucket behind token-bucket and gcra: per period, {level, measured at}.
-- Mirrors algorithms/bucket.ts. The level counts 1/(period/g) of a token, g = gcd(limit,
-- period), so a millisecond refills a whole number of units and comparisons stay exact.
-- Compact form (counters.lua): the time measured, then the level. The level's unit depends on the
-- window's limit and period, so after an edit of those a carried-over level is approximate; reads
-- clamp it to the capacity, and a level is never negative, so it cannot turn into a negative
-- remaining.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function bucket_module()
  local function bucket_scale(w)
    if not w.per_token then
      local g = gcd(w.limit, w.period)
      w.per_token = w.period / g
      w.per_ms = w.limit / g
      w.capacity = w.limit * w.per_token
    end
    return w.per_token, w.per_ms, w.capacity
  end

  local function bucket_current(state, w, now)
    local _, per_ms, capacity = bucket_scale(w)
    local stored = state[w.period]
    if not stored then
      return capacity, now
    end
    -- A measurement from a faster clock is not refilled backwards.
    local at = max(now, stored[2])
    return min(capacity, stored[1] + (at - stored[2]) * per_ms), at
  end

  local function bucket_unpack(_, at, level)
    return { level, at }
  end

  local function bucket_pack(entry)
    return entry[2], entry[1]
  end

  local bucket = {}

  function bucket.load(key, windows)
    return decode_counters(redis.call('GET', key), 2, windows, bucket_unpack)
  end

  function bucket.fits_at(state, w, now, need)
    if need > w.limit then
      return NEVER
    end
    local per_token, per_ms = bucket_scale(w)
    local level, at = bucket_current(state, w, now)
    local deficit = need * per_token - level
    if deficit <= 0 then
      return now
    end
    return at + ceil(deficit / per_ms)
  end

  function bucket.remaining(state, w, now)
    local per_token = bucket_scale(w)
    local level = bucket_current(state, w, now)
    return floor(level / per_token)
  end

  function bucket.charge(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local per_token = bucket_scale(w)
      local level, at = bucket_current(state, w, now)
      state[w.period] = { level - cost * per_token, at }
    end
    return state
  end

  function bucket.refund(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local per_token, _, capacity = bucket_scale(w)
      local level, at = bucket_current(state, w, now)
      state[w.period] = { min(capacity, level + cost * per_token), at }
    end
    return state
  end

  -- Tokens taken at `now` go back whenever the undo runs: the level is measured from the later
  -- of `now` and the last measurement, so no refill is counted twice.
  bucket.undo = bucket.refund

  -- fits_at of one window whose level is in numbers, for bucket.one.
  local function bucket_fits(limit, per_token, per_ms, level, at, now, need)
    if need > limit then
      return -1
    end
    local deficit = need * per_token - level
    if deficit <= 0 then
      return now
    end
    return at + ceil(deficit / per_ms)
  end

  -- A whole consume or peek of a one-window rule, as fixed_window.one (which see) does it.
  function bucket.one(key, w, now, cost, peek, reply, n)
    local raw = redis.call('GET', key)
    local per_token, per_ms, capacity = bucket_scale(w)
    local limit = w.limit
    local level, at = capacity, now
    if raw then
      local stored_at, stored_level = read_compact(raw, 2)
      if not stored_at then
        -- A level too large to pack (a limit in the billions) stays textual: `period level at`.
        local period, level_text, at_text = string.match(raw, '^(%d+) (%d+) (%d+)$')
        if tonumber(period) ~= w.period then
          return nil
        end
        stored_at, stored_level = tonumber(at_text), tonumber(level_text)
      end
      at = max(now, stored_at)
      level = min(capacity, stored_level + (at - stored_at) * per_ms)
    end
    local fits = bucket_fits(limit, per_token, per_ms, level, at, now, cost)
    local allowed = fits == now
    if allowed and cost > 0 and not peek then
      level = level - cost * per_token
      local ttl = at + ceil((capacity - level) / per_ms) - now
      if ttl > 0 then
        local value = pack_digits(at, level)
        if not value then
          value = fmt(w.period) .. ' ' .. fmt(level) .. ' ' .. fmt(at)
        end
        redis.call('SET', key, value, 'PX', ttl)
      else
        redis.call('DEL', key)
      end
      fits = bucket_fits(limit, per_token, per_ms, level, at, now, cost)
    end
    local remaining, reset_at = floor(level / per_token), now
    if remaining < limit then
      reset_at = bucket_fits(limit, per_token, per_ms, level, at, now, remaining + 1)
    end
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = allowed and 1 or 0, now, remaining, reset_at, fits
    return n + 5
  end

  function bucket.save(key, state, windows, now)
    local latest = 0
    for _, w in ipairs(windows) do
      local stored = state[w.period]
      if stored then
        local _, per_ms, capacity = bucket_scale(w)
        latest = max(latest, stored[2] + ceil((capacity - stored[1]) / per_ms))
      end
    end
    save_counters(key, state, windows, now, latest, bucket_pack)
  end
  return bucket
end
