-- Sliding log: a sorted set per key, one entry per admitted request, scored by its time, whose
-- member is the running total of units after it packed as a 7-byte big-endian integer. Packed
-- that way members sort like their numbers, so among entries of the same millisecond the last
-- one is the largest total, and a window's usage is `total − total before the window`
-- whatever the costs. Mirrors algorithms/sliding-log.ts; where that keeps `base`, this keeps
-- the newest entry that has left the longest window.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function sliding_log_module()
  local function sl_total(member)
    return struct.unpack('>I7', member)
  end

  local function sl_longest(windows)
    local longest = 0
    for _, w in ipairs(windows) do
      longest = max(longest, w.period)
    end
    return longest
  end

  local function sl_total_at_or_before(key, time)
    local found = redis.call('ZREVRANGEBYSCORE', key, time, '-inf', 'LIMIT', 0, 1)
    if found[1] then
      return sl_total(found[1])
    end
    return 0
  end

  local function sl_last(key)
    local found = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if found[1] then
      return sl_total(found[1]), tonumber(found[2])
    end
    return 0, nil
  end

  -- Usage per window is asked for several times per decision; it is remembered until a write.
  local function sl_usage(log, w, now)
    if not log.total then
      log.total, log.last_time = sl_last(log.key)
      log.before = {}
    end
    local before = log.before[w.period]
    if not before then
      before = sl_total_at_or_before(log.key, now - w.period)
      log.before[w.period] = before
    end
    return log.total - before, before
  end

  local function sl_forget(log)
    log.total = nil
    log.before = nil
  end

  local sliding_log = {}

  function sliding_log.load(key)
    return { key = key }
  end

  -- When `need` units fit in window w whose usage is `used`, `before` being the running total
  -- where the window starts counting; `first` is the time of the window's oldest entry when the
  -- caller knows it.
  local function sl_fits(key, w, now, need, used, before, first)
    if need > w.limit then
      return NEVER
    end
    if used + need <= w.limit then
      return now
    end
    -- The request fits once enough of the oldest units have left the window: find the first
    -- entry whose running total reaches the target, by rank (totals grow with rank).
    local target = before + used + need - w.limit
    if target == before + 1 then
      -- The first unit to leave belongs to the window's oldest entry.
      if not first then
        first = tonumber(redis.call('ZRANGEBYSCORE', key, '(' .. fmt(now - w.period), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
      end
      return first + w.period
    end
    local low, high = 0, redis.call('ZCARD', key) - 1
    while low < high do
      local mid = floor((low + high) / 2)
      if sl_total(redis.call('ZRANGE', key, mid, mid)[1]) >= target then
        high = mid
      else
        low = mid + 1
      end
    end
    local entry = redis.call('ZRANGE', key, low, low, 'WITHSCORES')
    return tonumber(entry[2]) + w.period
  end

  function sliding_log.fits_at(log, w, now, need)
    if need > w.limit then
      return NEVER
    end
    local used, before = sl_usage(log, w, now)
    return sl_fits(log.key, w, now, need, used, before)
  end

  function sliding_log.remaining(log, w, now)
    local used = sl_usage(log, w, now)
    return max(0, w.limit - used)
  end

  function sliding_log.charge(log, windows, now, cost)
    local key = log.key
    local cutoff = now - sl_longest(windows)
    local total, last_time = log.total, log.last_time
    if not total then
      total, last_time = sl_last(key)
    end
    local at = now
    if last_time == nil or last_time <= cutoff then
      -- Nothing left in any window: start the running total afresh.
      redis.call('DEL', key)
      total = 0
      log.before = {}
    else
      -- Keep the newest entry outside the windows: its total is where the windows start counting.
      local outside = redis.call('ZCOUNT', key, '-inf', cutoff)
      if outside > 1 then
        redis.call('ZREMRANGEBYRANK', key, 0, outside - 2)
      end
      -- Entries stay in time order even when a caller's clock lags the one that wrote before it.
      at = max(now, last_time)
    end
    redis.call('ZADD', key, at, struct.pack('>I7', total + cost))
    -- The new entry lies after every window's start and trimming kept the entry each window
    -- starts counting from, so the remembered totals before each window still hold.
    log.total = total + cost
    log.last_time = at
    return log
  end

  function sliding_log.refund(log, windows, now, cost)
    local key = log.key
    local cutoff = now - sl_longest(windows)
    local left = cost
    while left > 0 do
      local last = redis.call('ZRANGE', key, -2, -1, 'WITHSCORES')
      local n = #last
      if n == 0 or tonumber(last[n]) <= cutoff then
        break
      end
      local total = sl_total(last[n - 1])
      local previous = 0
      if n == 4 then
        previous = sl_total(last[1])
      end
      redis.call('ZREM', key, last[n - 1])
      if total - previous <= left then
        left = left - (total - previous)
      else
        redis.call('ZADD', key, last[n], struct.pack('>I7', total - left))
        left = 0
      end
    end
    sl_forget(log)
    log.last_time = select(2, sl_last(key))
    return log
  end

  -- Takes back the entry a decision wrote at `now`: the oldest entry since `now` of exactly
  -- `cost` units. If another decision wrote an identical one in between, removing the older of
  -- the two keeps the later timestamp, which can only hold the window closed longer, never less.
  -- Later entries' running totals drop by `cost` so that every total stays exact.
  function sliding_log.undo(log, windows, now, cost)
    local key = log.key
    local entries = redis.call('ZRANGEBYSCORE', key, now, '+inf', 'WITHSCORES')
    local previous = sl_total_at_or_before(key, '(' .. fmt(now))
    for i = 1, #entries, 2 do
      local total = sl_total(entries[i])
      if total - previous == cost then
        redis.call('ZREM', key, entries[i])
        for j = i + 2, #entries, 2 do
          redis.call('ZREM', key, entries[j])
          redis.call('ZADD', key, entries[j + 1], struct.pack('>I7', sl_total(entries[j]) - cost))
        end
        break
      end
      previous = total
    end
    sl_forget(log)
    log.last_time = select(2, sl_last(key))
    return log
  end

  -- A whole consume or peek of a one-window rule, as fixed_window.one (which see) does it: the
  -- general path's commands without its tables, and entries trimmed only when the window has
  -- left two behind (the newest of those is where the window starts counting).
  function sliding_log.one(key, w, now, cost, peek, reply, n)
    local period, limit = w.period, w.limit
    local cutoff = now - period
    local total, last_time = sl_last(key)
    local before, before_time, trim, first = 0, nil, false, nil
    if last_time ~= nil then
      if last_time <= cutoff then
        before = total
      else
        -- Most logs hold nothing older than the window: then the oldest entry is the window's
        -- first, and no entry's total comes before it.
        local oldest = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
        if oldest > cutoff then
          first = oldest
        else
          local found = redis.call('ZREVRANGEBYSCORE', key, cutoff, '-inf', 'WITHSCORES', 'LIMIT', 0, 2)
          before, before_time = sl_total(found[1]), tonumber(found[2])
          trim = found[4] ~= nil and tonumber(found[4]) < before_time
        end
      end
    end
    local used = total - before
    local allowed = cost <= limit and used + cost <= limit
    if allowed and cost > 0 and not peek then
      local at = now
      if last_time == nil or last_time <= cutoff then
        -- Nothing left in the window: start the running total afresh.
        if last_time ~= nil then
          redis.call('DEL', key)
        end
        total, before, used = 0, 0, 0
      else
        if trim then
          redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. fmt(before_time))
        end
        at = max(now, last_time)
      end
      total, used = total + cost, used + cost
      redis.call('ZADD', key, at, struct.pack('>I7', total))
      redis.call('PEXPIRE', key, at + period - now)
      if used == cost then
        -- The new entry is all the window holds.
        first = at
      end
    end
    local remaining, reset_at = max(0, limit - used), now
    if remaining < limit then
      reset_at = sl_fits(key, w, now, remaining + 1, used, before, first)
    end
    return append_one(reply, n, allowed, now, remaining, reset_at, sl_fits(key, w, now, cost, used, before, first))
  end

  function sliding_log.save(key, log, windows, now)
    local ttl = 0
    if log.last_time then
      ttl = log.last_time + sl_longest(windows) - now
    end
    if ttl > 0 then
      redis.call('PEXPIRE', key, ttl)
    else
      redis.call('DEL', key)
    end
  end
  return sliding_log
end
