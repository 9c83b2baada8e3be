-- Fixed window: per period, {window index, count}. Mirrors algorithms/fixed-window.ts.
-- Compact form (counters.lua): the window's start in ms, then the count. A start rather than an
-- index stays meaningful when the period is edited: it falls in the new window that holds it.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function fixed_window_module()
  local function fw_current(state, w, now)
    local index = floor(now / w.period)
    local stored = state[w.period]
    -- A state written by a faster clock keeps its window rather than being reset.
    if stored and stored[1] >= index then
      return stored[1], stored[2]
    end
    return index, 0
  end

  local function fw_unpack(w, start, count)
    return { floor(start / w.period), count }
  end

  local function fw_pack(entry, w)
    return entry[1] * w.period, entry[2]
  end

  local fixed_window = {}

  function fixed_window.load(key, windows)
    return decode_counters(redis.call('GET', key), 2, windows, fw_unpack)
  end

  function fixed_window.fits_at(state, w, now, need)
    if need > w.limit then
      return NEVER
    end
    local index, count = fw_current(state, w, now)
    if count + need <= w.limit then
      return now
    end
    return (index + 1) * w.period
  end

  function fixed_window.remaining(state, w, now)
    local _, count = fw_current(state, w, now)
    return max(0, w.limit - count)
  end

  function fixed_window.charge(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local index, count = fw_current(state, w, now)
      state[w.period] = { index, count + cost }
    end
    return state
  end

  function fixed_window.refund(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local index, count = fw_current(state, w, now)
      state[w.period] = { index, max(0, count - cost) }
    end
    return state
  end

  -- Takes back a charge made at `now` by this decision, only from the window it went to.
  function fixed_window.undo(state, windows, now, cost)
    for _, w in ipairs(windows) do
      local stored = state[w.period]
      if stored and stored[1] == floor(now / w.period) then
        stored[2] = max(0, stored[2] - cost)
      end
    end
    return state
  end

  -- A whole consume or peek of a one-window rule, its state absent or compact, with the numbers
  -- in locals: the same steps as load, fits_at, charge, save and the reply of decide.lua, without
  -- their tables. Appends the reply to `reply` after `n` and returns its new length, or returns
  -- nil, having written nothing, to leave a textual state to the general path.
  function fixed_window.one(key, w, now, cost, peek, reply, n)
    local raw = redis.call('GET', key)
    local period, limit = w.period, w.limit
    local index, count = floor(now / period), 0
    if raw then
      local start, stored = read_compact(raw, 2)
      if not start then
        return nil
      end
      local at = floor(start / period)
      if at >= index then
        index, count = at, stored
      end
    end
    local window_end = (index + 1) * period
    local allowed = cost <= limit and count + cost <= limit
    if allowed and cost > 0 and not peek then
      count = count + cost
      local value = pack_digits(index * period, count)
      if not value then
        value = fmt(period) .. ' ' .. fmt(index) .. ' ' .. fmt(count)
      end
      redis.call('SET', key, value, 'PX', window_end - now)
    end
    local remaining, reset_at, fits = max(0, limit - count), now, now
    if remaining < limit then
      reset_at = window_end
    end
    if cost > limit then
      fits = -1
    elseif count + cost > limit then
      fits = window_end
    end
    reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4], reply[n + 5] = allowed and 1 or 0, now, remaining, reset_at, fits
    return n + 5
  end

  function fixed_window.save(key, state, windows, now)
    local latest = 0
    for _, w in ipairs(windows) do
      local stored = state[w.period]
      if stored and stored[2] > 0 then
        latest = max(latest, (stored[1] + 1) * w.period)
      end
    end
    save_counters(key, state, windows, now, latest, fw_pack)
  end
  return fixed_window
end
