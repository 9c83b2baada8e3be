-- Sliding window counter. Fields per window: expires_at, count, previous.
--   expires_at  when the state stops counting: the end of the window after the current one while
--               count > 0 (the count weighs on that window as its previous one), else the end of
--               the current window; also the key's expiry, so a charge that keeps it keeps the
--               TTL with SET … KEEPTTL
--   count       units charged in the current window
--   previous    units charged in the window before it
-- Compact: expires_at, count, previous (counter_state.lua). Mirrors algorithms/sliding-window.ts,
-- whose index is (expires_at - 1) // period, less 1 while count > 0. The previous count is
-- weighted by its overlap with the sliding window, as the whole units ceil(previous × overlap /
-- period), exact (numbers.lua). Version 0.1.0's text layout held `period index count previous`.

-- A sync's compact `value` written in place (the case of one segment, below): over the value MGET
-- read (`raw`), keeping its TTL, since the state still ends when it did; or, for a key MGET read as
-- none, as a new key living `ttl` ms, unless one of another type is there, which GET then fails on
-- with what it is.
local function write_in_place(key, value, raw, ttl)
  if raw then
    call('SET', key, value, 'KEEPTTL')
  elseif not call('SET', key, value, 'PX', ttl, 'NX') then
    call('GET', key)
  end
end

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function sliding_window_module()
  local module = {}

  -- The index of the current window of stored fields. (x - x % period) / period is
  -- floor(x / period) without a call, exact for times (numbers.lua).
  local function index_of(period, expires_at, count)
    local last = expires_at - 1
    local index = (last - last % period) / period
    if count > 0 then
      return index - 1
    end
    return index
  end

  local function expires_at_of(period, index, count)
    if count > 0 then
      return (index + 2) * period
    end
    return (index + 1) * period
  end

  local function legacy(w, index, count, previous)
    return expires_at_of(w.period, index, count), count, previous
  end

  -- The previous count's weight on the sliding window: its whole units ceil(previous × overlap /
  -- period), overlap being how much of the previous window the sliding window still covers (ms).
  local function weighted(period, index, now, previous)
    if previous == 0 then
      return 0
    end
    return ceil_ratio(previous, period - max(0, now - index * period), period)
  end

  -- When `need` units fit, need <= limit.
  local function fits(limit, period, now, need, index, count, previous)
    local room = limit - need - count
    if room >= 0 then
      if weighted(period, index, now, previous) <= room then
        return now
      end
      return max(now, (index + 1) * period - largest_within(previous, room, period))
    end
    -- Only once this window has become the previous one can its count decay enough.
    return (index + 2) * period - largest_within(count, limit - need, period)
  end

  -- A target's cells: [1] true when the state read was stamped by a faster clock (it must be
  -- written back), else the compact expires_at read (false: none), then expires_at, count,
  -- previous per window.
  function module.width(windows)
    return 1 + 3 * windows
  end

  function module.check(key, windows, now, cost, operation, s, base)
    s[base + 1] = read_counter(key, windows, s, base + 1, 3, legacy)
    -- An undo takes back a charge made at its past `now`: it works on the stored fields.
    if operation == 'undo' then
      return true
    end
    local fit, moved, checks = true, false, operation ~= 'refund'
    for k = 1, #windows do
      local w, i = windows[k], base + 3 * k - 2
      local period, limit = w.period, w.limit
      local index = (now - now % period) / period
      local expires_at, count, previous = s[i + 1], s[i + 2], s[i + 3]
      if expires_at == nil then
        count, previous = 0, 0
      else
        local stored = index_of(period, expires_at, count)
        if stored > index then
          -- A window a faster clock counted in is taken as ours: it ends within two periods of now.
          moved = true
        elseif stored == index - 1 then
          count, previous = 0, count
        elseif stored < index then
          count, previous = 0, 0
        end
      end
      s[i + 1], s[i + 2], s[i + 3] = expires_at_of(period, index, count), count, previous
      if checks then
        local room = limit - cost - count
        if room < 0 or weighted(period, index, now, previous) > room then
          fit = false
        end
      end
    end
    if moved then
      s[base + 1] = true
    end
    return fit
  end

  -- After a check: the units beyond `cost` that every window still has room for (lease.lua).
  function module.room(windows, now, cost, s, base)
    local room
    for k = 1, #windows do
      local w, i = windows[k], base + 3 * k - 2
      local period = w.period
      local left = w.limit - cost - s[i + 2] - weighted(period, (now - now % period) / period, now, s[i + 3])
      if not room or left < room then
        room = left
      end
    end
    return max(0, room or 0)
  end

  function module.sheds(windows, now, cost, random, s, base)
    for k = 1, #windows do
      local w = windows[k]
      if w.low_burst then
        local period, i = w.period, base + 3 * k - 2
        local used = s[i + 2] + weighted(period, (now - now % period) / period, now, s[i + 3])
        if drops(w, used, 1, cost, random) then
          return true
        end
      end
    end
    return false
  end

  function module.finish(key, windows, now, cost, operation, writes, s, base, reply, n, shed)
    local latest, undo = 0, operation == 'undo'
    for k = 1, #windows do
      local w, i = windows[k], base + 3 * k - 2
      local period, limit = w.period, w.limit
      local index = (now - now % period) / period
      local expires_at, count, previous = s[i + 1], s[i + 2], s[i + 3]
      if undo then
        if expires_at == nil then
          count, previous = 0, 0
        else
          local stored = index_of(period, expires_at, count)
          -- From the current count, or from the previous one if the window has moved on since.
          if writes then
            if stored == index then
              count = max(0, count - cost)
            elseif stored == index + 1 then
              previous = max(0, previous - cost)
            end
            s[i + 1], s[i + 2], s[i + 3] = expires_at_of(period, stored, count), count, previous
          end
          if count > 0 or previous > 0 then
            latest = max(latest, expires_at_of(period, stored, count))
          end
          -- The answer is as of now, which the stored window may have left behind.
          if stored >= index then
            index = stored
          elseif stored == index - 1 then
            count, previous = 0, count
          else
            count, previous = 0, 0
          end
        end
      else
        if writes then
          if operation == 'consume' then
            count = count + cost
          else
            -- What the window still counts of the units goes back: the current count first, then
            -- the previous one, which holds them once the window has rolled over.
            local from_current = min(count, cost)
            count, previous = count - from_current, max(0, previous - (cost - from_current))
          end
          s[i + 1], s[i + 2], s[i + 3] = expires_at_of(period, index, count), count, previous
        end
        if (count > 0 or previous > 0) and s[i + 1] > latest then
          latest = s[i + 1]
        end
      end
      local remaining = limit - count - weighted(period, index, now, previous)
      if remaining < 0 then
        remaining = 0
      end
      local reset_at, fits_at = now, -1
      if remaining < limit then
        reset_at = fits(limit, period, now, remaining + 1, index, count, previous)
      end
      if cost <= limit then
        if shed and w.low_burst and drops(w, count + weighted(period, index, now, previous), 1, cost, shed) then
          fits_at = max(now + 1, fits(limit, period, now, shed_need(w, cost), index, count, previous))
        else
          fits_at = fits(limit, period, now, cost, index, count, previous)
        end
      end
      n = append_window(reply, n, remaining, reset_at, fits_at)
    end
    local read = s[base + 1]
    if writes or read == true then
      write_counter(key, windows, s, base + 1, 3, latest, now, read)
    end
    return n
  end

  -- Most keys of a sync: one window, one segment of units admitted in now's window, which the key
  -- counts in already (a compact value) or no key (`raw` nil, as MGET answers; `read(entry)` reads
  -- it). What the general sync below does for them, without its decoding, its closure and its
  -- writer.
  --
  -- The adder of window `w` at `now`, made once per rule and call, `read` answering an entry's
  -- value: it returns nothing for any other case, which sync.lua then gives the general sync.
  function module.adder(w, now, read)
    local period, limit = w.period, w.limit
    local index = (now - now % period) / period
    local starts_at, expires_at = index * period, (index + 2) * period
    local ttl = expires_at - now
    -- Texts compared as texts: both come from fmt, and Lua compares two texts by reference.
    local expires_text = fmt(expires_at)
    return function(key, entry, at, units)
      if units <= 0 then
        return
      end
      if at > now then
        at = now
      end
      if at < starts_at then
        return
      end
      local count, previous = 0, 0
      local raw = read(entry)
      if raw then
        local n = #raw
        if n < 5 then
          return
        end
        -- A compact value ends with its counts' lengths, digits; the text form ends with a space.
        local size2, size3 = byte(raw, n - 1, n)
        size2, size3 = size2 - 48, size3 - 48
        if size2 < 1 or size2 > 9 or size3 < 1 or size3 > 9 then
          return
        end
        local stop = n - 2 - size3
        count = tonumber(sub(raw, stop - size2 + 1, stop))
        -- A count of 0 ends its state a window earlier, which the general sync moves on.
        if sub(raw, 1, stop - size2) ~= expires_text or not count or count <= 0 then
          return
        end
        previous = tonumber(sub(raw, stop + 1, n - 2))
      end
      count = count + units
      if not previous or count > MAX_PACKED or count % 1 ~= 0 then
        return
      end
      local b, c = fmt(count), fmt(previous)
      local value = expires_text .. b .. c .. LENGTH_DIGITS[#b] .. LENGTH_DIGITS[#c]
      write_in_place(key, value, raw, ttl)
      return pushed_above(units, count + weighted(period, index, at, previous), limit), value
    end
  end

  -- Sync (sync.lua): the key's value `raw` (GET's answer) plus a process's segments, each `units`
  -- (negative: a refund) admitted at `at`, added to the window they were admitted in without a
  -- check: they were admitted already. A segment of the window before the stored one adds to its
  -- previous count. State a faster clock stamped is moved back to now first, as a decision moves
  -- it. Returns the units pushed above a limit, the previous count weighed as of each segment's
  -- time, and the value the key holds after ('' for none).
  function module.sync(key, raw, windows, now, segments, s, _, absent)
    -- A compact value's first field is the key's expiry: a write that keeps it keeps the TTL.
    local kept = parse_counter(raw, windows, s, 0, 3, legacy)
    local moved = false
    for k = 1, #windows do
      local i, period = 3 * k - 2, windows[k].period
      local index = (now - now % period) / period
      if s[i] ~= nil and index_of(period, s[i], s[i + 1]) > index then
        s[i], moved = expires_at_of(period, index, s[i + 1]), true
      end
    end
    if #segments == 0 and not moved then
      return 0, raw or ''
    end
    local over = add_segments(windows, now, segments, function(k, at, units)
      local w, i = windows[k], 3 * k - 2
      local period = w.period
      local index = (at - at % period) / period
      local stored, count, previous = index, 0, 0
      if s[i] ~= nil then
        stored, count, previous = index_of(period, s[i], s[i + 1]), s[i + 1], s[i + 2]
      end
      if index == stored + 1 then
        stored, count, previous = index, 0, count
      elseif index > stored then
        stored, count, previous = index, 0, 0
      end
      local used = 0
      if index == stored and units < 0 then
        -- A refund gives back what the window still counts: the current count first, then the
        -- previous one, as a decision's refund does.
        local from_current = min(count, -units)
        count, previous = count - from_current, max(0, previous - (-units - from_current))
      elseif index == stored then
        count = count + units
        used = count + weighted(period, stored, at, previous)
      elseif index == stored - 1 then
        previous = max(0, previous + units)
        used = count + weighted(period, stored, now, previous)
      end
      s[i], s[i + 1], s[i + 2] = expires_at_of(period, stored, count), count, previous
      return pushed_above(units, used, w.limit)
    end)
    local latest = 0
    for k = 1, #windows do
      local i = 3 * k - 2
      if s[i] ~= nil and (s[i + 1] > 0 or s[i + 2] > 0) and s[i] > latest then
        latest = s[i]
      end
    end
    return over, write_counter(key, windows, s, 0, 3, latest, now, kept, absent) or ''
  end

  return module
end
