-- Sliding log. State: a sorted set per key, one entry per charge, scored by its time (ms), whose
-- member is the running total of units after it packed as a 7-byte big-endian integer. Packed
-- that way members sort like their numbers, so among entries of the same millisecond the last
-- one is the largest total, and a window's usage is `total - total before the window` whatever
-- the costs. Mirrors algorithms/sliding-log.ts; where that keeps `base`, this keeps the newest
-- entry at or before the longest window's start, and every entry after it: a charge drops the
-- entries older than that one (the one trimming rule). A total that would pass 2^53 - 1 (where
-- doubles round) is rebased first: every total less that entry's, which keeps each difference.
-- Entries a faster clock stamped after now are moved back to now (algorithms/algorithm.ts).
-- packages/core/src/stores/shared/redis-state.ts decodes and encodes it.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function sliding_log_module()
  local module = {}
  local pack, unpack_member = struct.pack, struct.unpack

  local function total_of(member)
    return unpack_member('>I7', member)
  end

  -- Cached on the rule's windows table, which is parsed once per batch.
  local function longest_of(windows)
    local longest = windows.longest
    if not longest then
      longest = 0
      for k = 1, #windows do
        longest = max(longest, windows[k].period)
      end
      windows.longest = longest
    end
    return longest
  end

  local function total_at_or_before(key, time)
    local found = call('ZREVRANGEBYSCORE', key, time, '-inf', 'LIMIT', 0, 1)
    if found[1] then
      return total_of(found[1])
    end
    return 0
  end

  -- The newest entry's total and time, or 0 and false.
  local function last(key)
    local found = call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if found[1] then
      return total_of(found[1]), tonumber(found[2])
    end
    return 0, false
  end

  -- ZADD of score, member pairs from a flat list, in chunks that unpack can pass.
  local function add(key, pairs)
    for i = 1, #pairs, 512 do
      call('ZADD', key, unpack(pairs, i, min(i + 511, #pairs)))
    end
  end

  -- Moves every entry stamped after now back to now. Their totals keep their order, which is
  -- also the order of members of one score.
  local function clamp(key, now)
    local ahead = call('ZRANGEBYSCORE', key, '(' .. fmt(now), '+inf')
    local pairs = {}
    for i = 1, #ahead do
      pairs[2 * i - 1], pairs[2 * i] = now, ahead[i]
    end
    add(key, pairs)
  end

  -- Drops the entries at or before `cutoff` and takes `base` off every other total.
  local function rebase(key, cutoff, base)
    local kept = call('ZRANGEBYSCORE', key, '(' .. fmt(cutoff), '+inf', 'WITHSCORES')
    call('DEL', key)
    local pairs = {}
    for i = 1, #kept, 2 do
      pairs[i], pairs[i + 1] = kept[i + 1], pack('>I7', total_of(kept[i]) - base)
    end
    add(key, pairs)
  end

  -- Gives back up to `cost` units, newest first, from the entries still in the longest window.
  local function refund(key, now, longest, cost)
    local cutoff = now - longest
    local left = cost
    while left > 0 do
      local newest = call('ZRANGE', key, -2, -1, 'WITHSCORES')
      local n = #newest
      if n == 0 or tonumber(newest[n]) <= cutoff then
        break
      end
      local total = total_of(newest[n - 1])
      local previous = 0
      if n == 4 then
        previous = total_of(newest[1])
      end
      call('ZREM', key, newest[n - 1])
      if total - previous <= left then
        left = left - (total - previous)
      else
        call('ZADD', key, newest[n], pack('>I7', total - left))
        left = 0
      end
    end
  end

  -- Takes back the entry a decision wrote at `now`: the oldest entry since `now` of exactly
  -- `cost` units. If another decision wrote an identical one in between, removing the older of
  -- the two keeps the later timestamp, which can only hold the window closed longer, never less.
  -- Later entries' running totals drop by `cost` so that every total stays exact.
  local function undo(key, now, cost)
    local entries = call('ZRANGEBYSCORE', key, now, '+inf', 'WITHSCORES')
    local previous = total_at_or_before(key, '(' .. fmt(now))
    for i = 1, #entries, 2 do
      local total = total_of(entries[i])
      if total - previous == cost then
        call('ZREM', key, entries[i])
        for j = i + 2, #entries, 2 do
          call('ZREM', key, entries[j])
          call('ZADD', key, entries[j + 1], pack('>I7', total_of(entries[j]) - cost))
        end
        break
      end
      previous = total
    end
  end

  -- A target's cells: [1] the newest total, [2] its time (false: no entry), [3] moved (entries
  -- stamped by a faster clock, to be moved back to now), [4] measured (the cells below are
  -- current), [5] the time older entries may be trimmed below (false: none to trim), then per
  -- window the total before it and the time of its oldest entry (false: not known).
  function module.width(windows)
    return 5 + 2 * windows
  end

  -- Each window's total before it, from the newest total and time in s; true when `cost` more
  -- fits every window. Most logs hold nothing older than the window: then the oldest entry is the
  -- window's first, and no entry's total comes before it.
  local function measure(key, windows, now, cost, s, base)
    local total, last_time = s[base + 1], s[base + 2]
    local longest = windows.longest or longest_of(windows)
    local oldest, fit = nil, true
    s[base + 4], s[base + 5] = true, false
    for k = 1, #windows do
      local w = windows[k]
      local period = w.period
      local cutoff = now - period
      local before, first = 0, false
      if last_time then
        if last_time <= cutoff then
          before = total
        else
          if not oldest then
            oldest = tonumber(call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
          end
          if oldest > cutoff then
            first = oldest
          elseif period == longest then
            -- The entry the window starts counting from, and whether any is older than it.
            local found = call('ZREVRANGEBYSCORE', key, cutoff, '-inf', 'WITHSCORES', 'LIMIT', 0, 2)
            local before_time = tonumber(found[2])
            before = total_of(found[1])
            if found[4] ~= nil and tonumber(found[4]) < before_time then
              s[base + 5] = before_time
            end
          else
            before = total_at_or_before(key, cutoff)
          end
        end
      end
      s[base + 4 + 2 * k], s[base + 5 + 2 * k] = before, first
      if total - before + cost > w.limit then
        fit = false
      end
    end
    return fit
  end

  -- When `need` units fit in window w whose usage is `used`, `before` being the running total
  -- where the window starts counting and `first` the time of its oldest entry (false: not
  -- known); need <= limit. Returns that time, and `first` if it had to be looked up.
  local function fits(key, w, now, need, used, before, first)
    if used + need <= w.limit then
      return now, first
    end
    -- The request fits once enough of the oldest units have left the window: find the first
    -- entry whose running total reaches the target, by rank (totals grow with rank).
    -- The last total less the room the request lacks: no sum passes the last total, below 2^53.
    local target = before + used - (w.limit - need)
    if target == before + 1 then
      -- The first unit to leave belongs to the window's oldest entry.
      if not first then
        first = tonumber(call('ZRANGEBYSCORE', key, '(' .. fmt(now - w.period), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
      end
      if first > now then
        return now + w.period, first
      end
      return first + w.period, first
    end
    local low, high = 0, call('ZCARD', key) - 1
    while low < high do
      local mid = floor((low + high) / 2)
      if total_of(call('ZRANGE', key, mid, mid)[1]) >= target then
        high = mid
      else
        low = mid + 1
      end
    end
    local entry = call('ZRANGE', key, low, low, 'WITHSCORES')
    return min(tonumber(entry[2]), now) + w.period, first
  end

  -- Reads the newest entry at once: a key of another type fails the decision here, before any
  -- key of it is written. An undo's time is past: entries stamped after it are real.
  function module.check(key, windows, now, cost, operation, s, base)
    local total, last_time = last(key)
    s[base + 1], s[base + 2], s[base + 3], s[base + 4] = total, last_time, false, false
    if operation == 'undo' then
      return true
    end
    s[base + 3] = last_time ~= false and last_time > now
    if operation == 'refund' then
      return true
    end
    return measure(key, windows, now, cost, s, base)
  end

  -- The check measured every window: the newest total less the total before it is its use.
  function module.sheds(windows, now, cost, random, s, base)
    local total = s[base + 1]
    for k = 1, #windows do
      local w = windows[k]
      if w.low_burst and drops(w, total - s[base + 4 + 2 * k], 1, cost, random) then
        return true
      end
    end
    return false
  end

  function module.finish(key, windows, now, cost, operation, writes, s, base, reply, n, shed)
    local longest, count = windows.longest or longest_of(windows), #windows
    local total, last_time = s[base + 1], s[base + 2]
    if s[base + 3] then
      clamp(key, now)
      last_time = now
    end
    local charged = writes and operation == 'consume'
    if charged then
      local cutoff = now - longest
      if not last_time then
        total = 0
      elseif last_time <= cutoff then
        -- Nothing left in any window: start the running total afresh.
        call('DEL', key)
        total = 0
        for k = 1, count do
          s[base + 4 + 2 * k] = 0
        end
      elseif total + cost > MAX_EXACT then
        -- The longest window starts counting first: its total before is every window's least.
        local rebased
        for k = 1, count do
          if windows[k].period == longest then
            rebased = s[base + 4 + 2 * k]
          end
        end
        rebase(key, cutoff, rebased)
        total = total - rebased
        for k = 1, count do
          s[base + 4 + 2 * k] = s[base + 4 + 2 * k] - rebased
        end
      elseif s[base + 5] then
        call('ZREMRANGEBYSCORE', key, '-inf', '(' .. fmt(s[base + 5]))
      end
      total = total + cost
      -- No entry is stamped after now (moved back above), so entries stay in time order.
      call('ZADD', key, now, pack('>I7', total))
      expire_in(key, longest)
    elseif writes then
      if operation == 'refund' then
        refund(key, now, longest, cost)
      else
        undo(key, now, cost)
      end
      total, last_time = last(key)
      s[base + 1], s[base + 2], s[base + 4] = total, last_time, false
      -- An undo's time is past: the entries it left may outlive a window from it.
      local ttl = 0
      if last_time then
        ttl = min(last_time, now) + longest - now
      end
      if ttl > 0 then
        expire_in(key, ttl)
      else
        call('DEL', key)
      end
    elseif s[base + 3] then
      s[base + 2] = now
      expire_in(key, longest)
    end
    if not s[base + 4] then
      measure(key, windows, now, cost, s, base)
    end
    for k = 1, count do
      local w = windows[k]
      local limit, before, first = w.limit, s[base + 4 + 2 * k], s[base + 5 + 2 * k]
      local used = total - before
      if charged and used == cost then
        -- The new entry is all the window holds.
        first = now
      end
      local remaining, reset_at, fits_at = limit - used, now, -1
      if remaining < 0 then
        remaining = 0
      end
      if remaining < limit then
        reset_at, first = fits(key, w, now, remaining + 1, used, before, first)
      end
      if cost <= limit then
        if shed and w.low_burst and drops(w, used, 1, cost, shed) then
          -- Parenthesized: fits also returns `first`, which max must not see.
          fits_at = max(now + 1, (fits(key, w, now, shed_need(w, cost), used, before, first)))
        else
          fits_at = fits(key, w, now, cost, used, before, first)
        end
      end
      n = append_window(reply, n, remaining, reset_at, fits_at)
    end
    return n
  end

  return module
end
