-- Sliding window counter: per period, {index, current count, previous count}.
-- Mirrors algorithms/sliding-window.ts: the previous count is weighted by its overlap with the
-- sliding window, and every comparison is multiplied through by the period to stay in integers.
-- Compact form (counters.lua): the current window's start in ms, the current count, the previous
-- count; a start stays meaningful when the period is edited, as in fixed_window.lua.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function sliding_window_module()
  local function sw_current(state, w, now)
    local index = floor(now / w.period)
    local stored = state[w.period]
    if not stored then
      return index, 0, 0
    end
    if stored[1] >= index then
      return stored[1], stored[2], stored[3]
    end
    if stored[1] == index - 1 then
      return index, 0, stored[2]
    end
    return index, 0, 0
  end

  local function sw_overlap(w, index, now)
    return w.period - max(0, now - index * w.period)
  end

  local function sw_unpack(w, start, count, previous)
    return { floor(start / w.period), count, previous }
  end

  local function sw_pack(entry, w)
    return entry[1] * w.period, entry[2], entry[3]
  end

  local sliding_window = {}

  function sliding_window.load(key, windows)
    return decode_counters(redis.call('GET', key), 3, windows, sw_unpack)
  end

  function sliding_window.fits_at(state, w, now, need)
    if need > w.limit then
      return NEVER
    end
    local index, count, previous = sw_current(state, w, now)
    local room = (w.limit - need - count) * w.period
    if room >= 0 then
      if previous * sw_overlap(w, index, now) <= room then
        return now
      end
      return max(now, (index + 1) * w.period - floor(room / previous))
    end
    -- Only once this window has become the previous one can its count decay enough.
    return (index + 2) * w.period - floor(((w.limit - need) * w.period) / count)
  end

  function sliding_window.remaining(state, w, now)
    local index, count, previous = sw_current(state, w, now)
    local free = w.limit * w.period - count * w.period - previous * sw_overlap(w, index, now)
    return max(0, floor(free / w.period))
  end

  function sliding_window.charge(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local index, count, previous = sw_current(state, w, now)
      state[w.period] = { index, count + cost, previous }
    end
    return state
  end

  function sliding_window.refund(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local index, count, previous = sw_current(state, w, now)
      state[w.period] = { index, max(0, count - cost), previous }
    end
    return state
  end

  -- Takes back a charge made at `now`: from the current count, or from the previous one if the
  -- window has moved on since.
  function sliding_window.undo(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local index = floor(now / w.period)
      local stored = state[w.period]
      if stored and stored[1] == index then
        stored[2] = max(0, stored[2] - cost)
      elseif stored and stored[1] == index + 1 then
        stored[3] = max(0, stored[3] - cost)
      end
    end
    return state
  end

  -- fits_at of one window whose current state is in numbers, for sliding_window.one.
  local function sw_fits(limit, period, index, count, previous, now, need)
    if need > limit then
      return -1
    end
    local room = (limit - need - count) * period
    if room >= 0 then
      if previous * (period - max(0, now - index * period)) <= room then
        return now
      end
      return max(now, (index + 1) * period - floor(room / previous))
    end
    return (index + 2) * period - floor(((limit - need) * period) / count)
  end

  -- A whole consume or peek of a one-window rule, as fixed_window.one (which see) does it.
  function sliding_window.one(key, w, now, cost, peek, reply, n)
    local raw = redis.call('GET', key)
    local period, limit = w.period, w.limit
    local index, count, previous = floor(now / period), 0, 0
    if raw then
      local start, stored, stored_previous = read_compact(raw, 3)
      if not start then
        return nil
      end
      local at = floor(start / period)
      if at >= index then
        index, count, previous = at, stored, stored_previous
      elseif at == index - 1 then
        previous = stored
      end
    end
    local fits = sw_fits(limit, period, index, count, previous, now, cost)
    local allowed = fits == now
    if allowed and cost > 0 and not peek then
      count = count + cost
      local value = pack_digits(index * period, count, previous)
      if not value then
        value = fmt(period) .. ' ' .. fmt(index) .. ' ' .. fmt(count) .. ' ' .. fmt(previous)
      end
      -- The current count still weighs on the next window, as its previous one.
      redis.call('SET', key, value, 'PX', (index + 2) * period - now)
      fits = sw_fits(limit, period, index, count, previous, now, cost)
    end
    local free = limit * period - count * period - previous * (period - max(0, now - index * period))
    local remaining, reset_at = max(0, floor(free / period)), now
    if remaining < limit then
      reset_at = sw_fits(limit, period, index, count, previous, now, remaining + 1)
    end
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = allowed and 1 or 0, now, remaining, reset_at, fits
    return n + 5
  end

  function sliding_window.save(key, state, windows, now)
    local latest = 0
    for _, w in ipairs(windows) do
      local stored = state[w.period]
      if stored and (stored[2] > 0 or stored[3] > 0) then
        -- The current count still weighs on the next window, as its previous one.
        local span = 1
        if stored[2] > 0 then
          span = 2
        end
        latest = max(latest, (stored[1] + span) * w.period)
      end
    end
    save_counters(key, state, windows, now, latest, sw_pack)
  end
  return sliding_window
end
