-- Sliding log: a sorted set per key, one entry per admitted request, scored by its time, whose
-- member is the running total of units after it packed as a 7-byte big-endian integer. Packed
-- that way members sort like their numbers, so among entries of the same millisecond the last
-- one is the largest total, and a window's usage is `total − total before the window`
-- whatever the costs. Mirrors algorithms/sliding-log.ts; where that keeps `base`, this keeps
-- the newest entry that has left the longest window. A total that would pass 2^53 - 1 (where
-- doubles round) is rebased first: every total less that entry's, which keeps each difference.
-- Entries a faster clock stamped after now are moved back to now (algorithms/algorithm.ts).

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

  -- ZADD of score, member pairs from a flat list, in chunks that unpack can pass.
  local function sl_add(key, pairs)
    for i = 1, #pairs, 512 do
      redis.call('ZADD', key, unpack(pairs, i, min(i + 511, #pairs)))
    end
  end

  -- Moves every entry stamped after now back to now. Their totals keep their order, which is
  -- also the order of members of one score.
  local function sl_clamp(key, now)
    local ahead = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(now), '+inf')
    local pairs = {}
    for i = 1, #ahead do
      pairs[2 * i - 1], pairs[2 * i] = now, ahead[i]
    end
    sl_add(key, pairs)
  end

  -- Drops the entries at or before `cutoff` and takes `base` off every other total.
  local function sl_rebase(key, cutoff, base)
    local kept = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(cutoff), '+inf', 'WITHSCORES')
    redis.call('DEL', key)
    local pairs = {}
    for i = 1, #kept, 2 do
      pairs[i], pairs[i + 1] = kept[i + 1], struct.pack('>I7', sl_total(kept[i]) - base)
    end
    sl_add(key, pairs)
  end

  local sliding_log = {}

  -- Reads the key's newest entry at once: a key of another type fails the decision here, before
  -- any key of it is written. `now` is nil for an undo, whose time is past: entries stamped after
  -- it are real. Otherwise such entries make the log `dirty`: they are moved back to now when it
  -- is written, which it then is even if nothing is charged.
  function sliding_log.load(key, _, now)
    local log = { key = key, before = {} }
    log.total, log.last_time = sl_last(key)
    log.dirty = now ~= nil and log.last_time ~= nil and log.last_time > now
    return log
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
    -- The last total less the room the request lacks: no sum passes the last total, below 2^53.
    local target = before + used - (w.limit - need)
    if target == before + 1 then
      -- The first unit to leave belongs to the window's oldest entry.
      if not first then
        first = tonumber(redis.call('ZRANGEBYSCORE', key, '(' .. fmt(now - w.period), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
      end
      return min(first, now) + w.period
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
    return min(tonumber(entry[2]), now) + w.period
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
    if log.dirty then
      sl_clamp(key, now)
      log.dirty, last_time = false, now
    end
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
      if total + cost > MAX_EXACT then
        local base = sl_total_at_or_before(key, cutoff)
        sl_rebase(key, cutoff, base)
        total = total - base
        log.before = {}
      end
    end
    -- No entry is stamped after now (clamped above), so entries stay in time order.
    local at = now
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
    local ahead = last_time ~= nil and last_time > now
    if ahead then
      -- Stamped by a faster clock: moved back to now, so that it leaves within a period of now.
      sl_clamp(key, now)
      last_time = now
    end
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
      elseif total + cost > MAX_EXACT then
        sl_rebase(key, cutoff, before)
        total, before = total - before, 0
      elseif trim then
        redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. fmt(before_time))
      end
      total, used = total + cost, used + cost
      redis.call('ZADD', key, at, struct.pack('>I7', total))
      redis.call('PEXPIRE', key, period)
      if used == cost then
        -- The new entry is all the window holds.
        first = at
      end
    elseif ahead then
      redis.call('PEXPIRE', key, period)
    end
    local remaining, reset_at = max(0, limit - used), now
    if remaining < limit then
      reset_at = sl_fits(key, w, now, remaining + 1, used, before, first)
    end
    return append_one(reply, n, allowed, now, remaining, reset_at, sl_fits(key, w, now, cost, used, before, first))
  end

  function sliding_log.save(key, log, windows, now)
    if log.dirty then
      sl_clamp(key, now)
      log.dirty = false
    end
    local ttl = 0
    if log.last_time then
      ttl = min(log.last_time, now) + sl_longest(windows) - now
    end
    if ttl > 0 then
      redis.call('PEXPIRE', key, ttl)
    else
      redis.call('DEL', key)
    end
  end
  return sliding_log
end
