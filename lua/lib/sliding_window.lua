-- Sliding window counter: per window, {index, current count, previous count}.
-- Mirrors algorithms/sliding-window.ts: the previous count is weighted by its overlap with the
-- sliding window, as the whole units ceil(previous * overlap / period), exact (numbers.lua).
-- Compact form (counters.lua): the entry's expiry in ms, the current count, the previous count.
-- The expiry is the end of the next window while the current count weighs on it, else the end of
-- this one, so the counts say which window it closes; a time stays meaningful when the period is
-- edited, as in fixed_window.lua.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function sliding_window_module()
  local steps = { arity = 3 }

  -- A window a faster clock counted in is taken as ours: it ends within two periods of now.
  function steps.clamp(w, now, index, count, previous)
    local now_index = floor(now / w.period)
    if index > now_index then
      return now_index, count, previous
    end
    return index, count, previous
  end

  function steps.current(w, now, index, count, previous)
    local now_index = floor(now / w.period)
    if index == nil then
      return now_index, 0, 0
    end
    if index >= now_index then
      return index, count, previous
    end
    if index == now_index - 1 then
      return now_index, 0, count
    end
    return now_index, 0, 0
  end

  -- How much of the previous window the sliding window still covers, in ms.
  local function overlap(w, index, now)
    return w.period - max(0, now - index * w.period)
  end

  function steps.fits(w, now, need, index, count, previous)
    local limit, period = w.limit, w.period
    if need > limit then
      return NEVER
    end
    local room = limit - need - count
    if room >= 0 then
      if ceil_ratio(previous, overlap(w, index, now), period) <= room then
        return now
      end
      return max(now, (index + 1) * period - largest_within(previous, room, period))
    end
    -- Only once this window has become the previous one can its count decay enough.
    return (index + 2) * period - largest_within(count, limit - need, period)
  end

  function steps.remaining(w, now, index, count, previous)
    return max(0, w.limit - count - ceil_ratio(previous, overlap(w, index, now), w.period))
  end

  function steps.charge(_, _, cost, index, count, previous)
    return index, count + cost, previous
  end

  -- What the window still counts of the units goes back: the current count first, then the
  -- previous one, which holds them once the window has rolled over.
  function steps.refund(_, _, cost, index, count, previous)
    local from_current = min(count, cost)
    return index, count - from_current, max(0, previous - (cost - from_current))
  end

  -- Takes back a charge made at `now`: from the current count, or from the previous one if the
  -- window has moved on since.
  function steps.undo(w, now, cost, index, count, previous)
    local then_index = floor(now / w.period)
    if index == then_index then
      return index, max(0, count - cost), previous
    end
    if index == then_index + 1 then
      return index, count, max(0, previous - cost)
    end
    return index, count, previous
  end

  -- The current count still weighs on the next window, as its previous one.
  function steps.expires(w, index, count, previous)
    if count > 0 then
      return (index + 2) * w.period
    end
    if previous > 0 then
      return (index + 1) * w.period
    end
    return 0
  end

  function steps.from_compact(w, expiry, count, previous)
    local index = floor((expiry - 1) / w.period)
    if count > 0 then
      index = index - 1
    end
    return index, count, previous
  end

  function steps.to_compact(w, index, count, previous)
    return steps.expires(w, index, count, previous), count, previous
  end

  -- The one-window decision by hand (see counter_module.lua): the steps above, inlined.
  function steps.one(key, w, now, cost, peek, reply, n, raw)
    local period, limit, fits = w.period, w.limit, steps.fits
    local index, count, previous, stored_expiry, ahead = floor(now / period), 0, 0, nil, false
    if raw then
      local expiry, stored_count, stored_previous = unpack_digits(raw, 3)
      stored_expiry = expiry
      local at = floor((expiry - 1) / period)
      if stored_count > 0 then
        at = at - 1
      end
      if at >= index then
        -- A window ahead of ours (a faster clock's) is taken as ours, and so written back.
        count, previous, ahead = stored_count, stored_previous, at > index
      elseif at == index - 1 then
        previous = stored_count
      end
    end
    local fits_now = fits(w, now, cost, index, count, previous)
    local allowed = fits_now == now
    local charging = allowed and cost > 0 and not peek
    if charging or ahead then
      if charging then
        count = count + cost
      end
      local expiry = steps.expires(w, index, count, previous)
      local value = pack_digits(expiry, count, previous)
      if value and expiry == stored_expiry then
        redis.call('SET', key, value, 'KEEPTTL')
      else
        value = value or (fmt(period) .. ' ' .. fmt(index) .. ' ' .. fmt(count) .. ' ' .. fmt(previous))
        redis.call('SET', key, value, 'PX', expiry - now)
      end
      fits_now = fits(w, now, cost, index, count, previous)
    end
    local remaining, reset_at = steps.remaining(w, now, index, count, previous), now
    if remaining < limit then
      reset_at = fits(w, now, remaining + 1, index, count, previous)
    end
    return append_one(reply, n, allowed, now, remaining, reset_at, fits_now)
  end

  return counter_module(steps)
end
