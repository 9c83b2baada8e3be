-- Fixed window. Fields per window: ends_at, count.
--   ends_at  the end (ms) of the window the count was made in: a window is [ends_at - period,
--            ends_at), windows aligned to the epoch; also the key's expiry, so a charge within
--            the window (same ends_at) keeps the TTL with SET … KEEPTTL
--   count    units charged in that window; a key whose every count is 0 is deleted
-- Addable when ends_at is whole seconds and count below 1,000,000, as most windows are, else
-- compact: ends_at then count (counter_state.lua). Mirrors algorithms/fixed-window.ts, whose
-- index is ends_at / period - 1. After an edit of the period, the window that holds the stored
-- window's last millisecond carries its count on. Version 0.1.0's text layout held
-- `period index count`.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function fixed_window_module()
  local module = {}

  local function legacy(w, index, count)
    return (index + 1) * w.period, count
  end

  -- A target's cells: [1] true when the state read was stamped by a faster clock (it must be
  -- written back), else the compact ends_at read (false: none), then ends_at, count per window.
  function module.width(windows)
    return 1 + 2 * windows
  end

  function module.check(key, windows, now, cost, operation, s, base)
    s[base + 1] = read_counter(key, windows, s, base + 1, 2, legacy)
    -- An undo takes back a charge made at its past `now`: it works on the stored fields.
    if operation == 'undo' then
      return true
    end
    local fit, moved, checks = true, false, operation ~= 'refund'
    for k = 1, #windows do
      local w, i = windows[k], base + 2 * k - 1
      local period = w.period
      -- floor(now / period) × period, by % rather than a call (exact for times: numbers.lua).
      local start = now - now % period
      local ends_at, count = s[i + 1], s[i + 2]
      if ends_at == nil or ends_at <= start then
        count = 0
      elseif ends_at > start + period then
        -- A window a faster clock counted in is taken as ours, its count kept: it then ends
        -- within a period of now rather than of that clock.
        moved = true
      end
      s[i + 1], s[i + 2] = start + period, count
      if checks and count + cost > w.limit then
        fit = false
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
      local left = windows[k].limit - cost - s[base + 2 * k + 1]
      if not room or left < room then
        room = left
      end
    end
    return max(0, room or 0)
  end

  function module.sheds(windows, now, cost, random, s, base)
    for k = 1, #windows do
      local w = windows[k]
      if w.low_burst and drops(w, s[base + 2 * k + 1], 1, cost, random) then
        return true
      end
    end
    return false
  end

  function module.finish(key, windows, now, cost, operation, writes, s, base, reply, n, shed)
    local expires_at, undo = 0, operation == 'undo'
    for k = 1, #windows do
      local w, i = windows[k], base + 2 * k - 1
      local period, limit = w.period, w.limit
      local ends_at, count = s[i + 1], s[i + 2]
      if undo then
        local now_index = floor(now / period)
        if ends_at == nil then
          ends_at, count = (now_index + 1) * period, 0
        else
          local index = floor((ends_at - 1) / period)
          -- Only from the window the charge went to, whatever the key holds now.
          if writes and index == now_index then
            count = max(0, count - cost)
            s[i + 2] = count
          end
          ends_at = (index + 1) * period
          if count > 0 then
            expires_at = max(expires_at, ends_at)
          end
          if index < now_index then
            ends_at, count = (now_index + 1) * period, 0
          end
        end
      else
        if writes then
          if operation == 'consume' then
            count = count + cost
          else
            count = max(0, count - cost)
          end
          s[i + 2] = count
        end
        if count > 0 and ends_at > expires_at then
          expires_at = ends_at
        end
      end
      local remaining, reset_at, fits_at = limit - count, now, now
      if remaining < 0 then
        remaining = 0
      end
      if remaining < limit then
        reset_at = ends_at
      end
      if cost > limit then
        fits_at = -1
      elseif shed and w.low_burst and drops(w, count, 1, cost, shed) then
        if count + shed_need(w, cost) > limit then
          fits_at = ends_at
        else
          fits_at = now + 1
        end
      elseif count + cost > limit then
        fits_at = ends_at
      end
      n = append_window(reply, n, remaining, reset_at, fits_at)
    end
    local read = s[base + 1]
    if writes or read == true then
      write_counter(key, windows, s, base + 1, 2, expires_at, now, read)
    end
    return n
  end

  -- Most keys of a sync: one window, one segment admitted in now's window, on a key in the addable
  -- form of that window or no key. One DECRBY adds the units and answers the value after, with no
  -- read before and no write after (counter_state.lua); a key that was not there is given its
  -- value and TTL. For anything else DECRBY's effect is taken back at once, within the script, and
  -- nothing is returned: sync.lua then gives the key the general sync below, which reads it.
  --
  -- The adder of window `w` at `now`, made once per rule and call: what every key of the rule
  -- shares (the window's end, its addable zero, the TTL) is worked out here rather than per key.
  -- nil when the window's end is not a time the addable form holds.
  function module.adder(w, now)
    local period, limit = w.period, w.limit
    local ends_at = now - now % period + period
    if not addable_time(ends_at) then
      return nil
    end
    local starts_at, ttl = ends_at - period, ends_at - now
    -- This window's value with a count of 0; its values run down from there.
    local zero = -(ends_at / 1000 * ADDABLE)
    local absent_before = false
    -- `_`: the key's entry, which this adder never reads. Returns the units pushed above the
    -- limit and the value after, or nothing.
    return function(key, _, at, units)
      -- A segment from before now's window (now itself never is), a refund, or a count the form
      -- does not hold.
      if at < starts_at or units <= 0 or units >= ADDABLE then
        return
      end
      if absent_before then
        -- The key before was new: a call's keys are most often all new (the first sync of a
        -- window) or all there, and a new key then costs one command rather than two.
        local value = fmt(zero - units)
        if call('SET', key, value, 'PX', ttl, 'NX') then
          return pushed_above(units, units, limit), value
        end
        absent_before = false
      end
      local after = redis.pcall('DECRBY', key, units)
      -- An error (text, a compact value past an integer's range, a key of another type) wrote nothing.
      if type(after) ~= 'number' then
        return
      end
      local counted = zero - after
      -- Within this window's values, its count before at least 1 (a count of 0 is never kept).
      if counted > units and counted < ADDABLE then
        return pushed_above(units, counted, limit), fmt(after)
      end
      if after == -units then
        -- No key: DECRBY made one from 0, which no value the scripts write is.
        local value = fmt(zero - units)
        call('SET', key, value, 'PX', ttl)
        absent_before = true
        return pushed_above(units, units, limit), value
      end
      call('INCRBY', key, units)
    end
  end

  -- Sync (sync.lua): the key's value `raw` (its read) plus a process's segments, each `units`
  -- (negative: a refund) admitted at `at`, added to the windows they were admitted in without a
  -- check: they were admitted already. A side key, the key's name with ':prev', keeps each
  -- window's last finished count a period longer, so that a process syncing after another moved
  -- the window on still adds to the window its units belong to; it is read only when a segment
  -- moves a window on or is late, which most syncs never do. State a faster clock stamped is moved
  -- back to now first, as a decision moves it. `absent`: write_counter's; the seventh argument, a
  -- bucket's `folded`, is never set for a fixed window. Returns the units pushed above a limit, in
  -- the order Redis applied them, and the value the key holds after ('' for none).
  function module.sync(key, raw, windows, now, segments, s, _, absent)
    -- A compact value's first field is the key's expiry: a write that keeps it keeps the TTL.
    local kept = parse_counter(raw, windows, s, 0, 2, legacy)
    local side
    local count, last, moved, side_read = #windows, 2 * #windows, false, false
    for k = 1, count do
      local i, period = 2 * k - 1, windows[k].period
      local ends_at = now - now % period + period
      if s[i] ~= nil and s[i] > ends_at then
        s[i], moved = ends_at, true
      end
    end
    if #segments == 0 and not moved then
      return 0, raw or ''
    end
    local over = add_segments(windows, now, segments, function(k, at, units)
      local w, i = windows[k], 2 * k - 1
      local period = w.period
      local ends_at = at - at % period + period
      local stored = s[i]
      if stored ~= nil and stored ~= ends_at and not side_read then
        side = key .. ':prev'
        read_counter(side, windows, s, last, 2, legacy)
        side_read = true
      end
      if stored == nil or stored < ends_at then
        if stored ~= nil and s[i + 1] > 0 then
          s[last + i], s[last + i + 1] = stored, s[i + 1]
        end
        s[i], s[i + 1] = ends_at, 0
        stored = ends_at
      end
      local at_count = i
      if stored > ends_at then
        -- A late segment: its window is the finished one the side key keeps, or too old to count.
        if s[last + i] ~= ends_at then
          return 0
        end
        at_count = last + i
      end
      local counted = max(0, s[at_count + 1] + units)
      s[at_count + 1] = counted
      return pushed_above(units, counted, w.limit)
    end)
    local expires_at, side_expires_at = 0, 0
    for k = 1, count do
      local i = 2 * k - 1
      if s[i] ~= nil and s[i + 1] > 0 and s[i] > expires_at then
        expires_at = s[i]
      end
      if side_read and s[last + i] ~= nil and s[last + i + 1] > 0 then
        side_expires_at = max(side_expires_at, s[last + i] + windows[k].period)
      end
    end
    if side_expires_at > 0 then
      write_counter(side, windows, s, last, 2, side_expires_at, now, nil)
    end
    return over, write_counter(key, windows, s, 0, 2, expires_at, now, kept, absent) or ''
  end

  return module
end
