-- Fixed window: per window, {index, count}, the window's index being floor(time / period).
-- Mirrors algorithms/fixed-window.ts. Compact form (counters.lua): the window's end in ms, which
-- is also the key's expiry (a stored count is never 0: such a key is deleted), then the count.
-- A time rather than an index stays meaningful when the period is edited: the window that holds
-- the stored window's last millisecond carries its count on.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function fixed_window_module()
  local steps = { arity = 2 }

  -- A window a faster clock counted in is taken as ours, its count kept: it then ends within a
  -- period of now rather than of that clock.
  function steps.clamp(w, now, index, count)
    local now_index = floor(now / w.period)
    if index > now_index then
      return now_index, count
    end
    return index, count
  end

  function steps.current(w, now, index, count)
    local now_index = floor(now / w.period)
    if index == nil or index < now_index then
      return now_index, 0
    end
    return index, count
  end

  function steps.fits(w, now, need, index, count)
    if need > w.limit then
      return NEVER
    end
    if count + need <= w.limit then
      return now
    end
    return (index + 1) * w.period
  end

  function steps.remaining(w, _, _, count)
    return max(0, w.limit - count)
  end

  function steps.charge(_, _, cost, index, count)
    return index, count + cost
  end

  function steps.refund(_, _, cost, index, count)
    return index, max(0, count - cost)
  end

  -- Takes back a charge made at `now` by this decision, only from the window it went to.
  function steps.undo(w, now, cost, index, count)
    if index == floor(now / w.period) then
      return index, max(0, count - cost)
    end
    return index, count
  end

  function steps.expires(w, index, count)
    if count > 0 then
      return (index + 1) * w.period
    end
    return 0
  end

  function steps.from_compact(w, ends, count)
    return floor((ends - 1) / w.period), count
  end

  function steps.to_compact(w, index, count)
    return (index + 1) * w.period, count
  end

  -- The commonest decision by hand (see counter_module.lua): the steps above, inlined.
  function steps.one(key, w, now, cost, peek, reply, n, raw)
    local period, limit = w.period, w.limit
    local index, count, stored_end, ahead = floor(now / period), 0, nil, false
    if raw then
      local ends, stored = unpack_digits(raw, 2)
      local at = floor((ends - 1) / period)
      if at >= index then
        -- A window ahead of ours (a faster clock's) is taken as ours, and so written back.
        count, stored_end, ahead = stored, ends, at > index
      end
    end
    local window_end = (index + 1) * period
    local allowed = cost <= limit and count + cost <= limit
    local charging = allowed and cost > 0 and not peek
    if charging or ahead then
      if charging then
        count = count + cost
      end
      local value = pack_digits(window_end, count)
      if value and window_end == stored_end then
        redis.call('SET', key, value, 'KEEPTTL')
      else
        redis.call('SET', key, value or (fmt(period) .. ' ' .. fmt(index) .. ' ' .. fmt(count)), 'PX', window_end - now)
      end
    end
    local remaining, reset_at, fits = max(0, limit - count), now, now
    if remaining < limit then
      reset_at = window_end
    end
    if cost > limit then
      fits = NEVER
    elseif count + cost > limit then
      fits = window_end
    end
    return append_one(reply, n, allowed, now, remaining, reset_at, fits)
  end

  return counter_module(steps)
end
