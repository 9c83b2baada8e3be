-- Continuous bucket behind token-bucket and gcra. Fields per window: measured_at, deficit.
--   measured_at  when the bucket was last measured (ms)
--   deficit      what it lacked of full then, in units of 1/(period/g) token, g = gcd(limit,
--                period), so that a millisecond refills a whole number of units and comparisons
--                stay exact: small while the bucket is nearly full, as it is for most keys, where
--                its level would take all the digits of a large capacity (a limit in the billions)
-- Compact: measured_at then deficit (counter_state.lua). Mirrors algorithms/bucket.ts, whose
-- level is the capacity less the deficit. A deficit past the capacity is debt (units charged over
-- the limit: a reservation settled above it, or what a HybridStore's fleet admitted past it), which
-- the bucket refills before it admits again; a window's limit and period are part of its state's
-- name (state-name.ts), so no deficit is carried over an edit of them.
-- Version 0.1.0's text layout held `period level measured_at`.

-- Built only when a decision uses it: closures cost Redis time on every call they are made.
local function bucket_module()
  local module = {}

  -- Units per token, units refilled per ms, and the capacity in units; kept on the window. Past
  -- 2^53 - 1 units a token is floor((2^53 - 1) / limit) units and a ms refills ceil(capacity /
  -- period): exactly `limit` tokens, refilled at most 2 * period / (2^53 - 1) fast (bucket.ts).
  local function scale(w)
    if not w.per_token then
      local limit, period = w.limit, w.period
      local g = gcd(limit, period)
      local exact = (limit / g) * period
      if exact <= MAX_EXACT then
        w.per_token, w.per_ms, w.capacity = period / g, limit / g, exact
      else
        local per_token = floor(MAX_EXACT / limit)
        w.per_token, w.capacity = per_token, limit * per_token
        w.per_ms = ceil(w.capacity / period)
      end
    end
    return w.per_token, w.per_ms, w.capacity
  end

  local function legacy(w, level, measured_at)
    local _, _, capacity = scale(w)
    return measured_at, max(0, capacity - level)
  end

  -- The deficit at `now`, from one measured at `measured_at` <= now; debt past the capacity
  -- refills as any deficit does.
  local function refilled(deficit, per_ms, measured_at, now)
    deficit = deficit - (now - measured_at) * per_ms
    if deficit < 0 then
      return 0
    end
    return deficit
  end

  -- When `need` units fit, need <= limit.
  local function fits(per_token, per_ms, capacity, now, need, measured_at, deficit)
    local short = need * per_token - (capacity - deficit)
    if short <= 0 then
      return now
    end
    return measured_at + ceil(short / per_ms)
  end

  -- A target's cells: [1] moved (the state read was stamped by a faster clock: it must be
  -- written back), then measured_at, deficit per window.
  function module.width(windows)
    return 1 + 2 * windows
  end

  function module.check(key, windows, now, cost, operation, s, base)
    read_counter(key, windows, s, base + 1, 2, legacy)
    s[base + 1] = false
    -- An undo takes back a charge made at its past `now`: it works on the stored fields.
    if operation == 'undo' then
      return true
    end
    local fit, moved, checks = true, false, operation ~= 'refund'
    for k = 1, #windows do
      local w, i = windows[k], base + 2 * k - 1
      local per_token, per_ms, capacity = w.per_token, w.per_ms, w.capacity
      if not per_token then
        per_token, per_ms, capacity = scale(w)
      end
      local measured_at, deficit = s[i + 1], s[i + 2]
      if measured_at == nil then
        deficit = 0
      elseif measured_at > now then
        -- Measured by a faster clock: taken as measured now, not refilled backwards.
        moved = true
      else
        deficit = refilled(deficit, per_ms, measured_at, now)
      end
      s[i + 1], s[i + 2] = now, deficit
      if checks and (cost > w.limit or cost * per_token > capacity - deficit) then
        fit = false
      end
    end
    s[base + 1] = moved
    return fit
  end

  -- The check made every window's deficit current and its scale known.
  function module.sheds(windows, now, cost, random, s, base)
    for k = 1, #windows do
      local w = windows[k]
      if w.low_burst and drops(w, s[base + 2 * k + 1], w.per_token, cost, random) then
        return true
      end
    end
    return false
  end

  function module.finish(key, windows, now, cost, operation, writes, s, base, reply, n, shed)
    local latest, undo = 0, operation == 'undo'
    for k = 1, #windows do
      local w, i = windows[k], base + 2 * k - 1
      local per_token, per_ms, capacity = w.per_token, w.per_ms, w.capacity
      if not per_token then
        per_token, per_ms, capacity = scale(w)
      end
      local measured_at, deficit = s[i + 1], s[i + 2]
      if undo then
        if measured_at == nil then
          measured_at, deficit = now, 0
        else
          -- Tokens taken at `now` go back whenever the undo runs: the bucket is measured from
          -- the later of `now` and the last measurement, so no refill is counted twice.
          if measured_at < now then
            deficit, measured_at = refilled(deficit, per_ms, measured_at, now), now
          end
          if writes then
            deficit = max(0, deficit - cost * per_token)
            s[i + 1], s[i + 2] = measured_at, deficit
          end
        end
      elseif writes then
        if operation == 'consume' then
          deficit = deficit + cost * per_token
        else
          deficit = max(0, deficit - cost * per_token)
        end
        s[i + 2] = deficit
      end
      -- Full again then, and so no different from no state.
      if deficit > 0 and measured_at + ceil(deficit / per_ms) > latest then
        latest = measured_at + ceil(deficit / per_ms)
      end
      -- Debt past the capacity leaves nothing.
      local remaining, reset_at, fits_at = max(0, floor((capacity - deficit) / per_token)), now, -1
      if remaining < w.limit then
        reset_at = fits(per_token, per_ms, capacity, now, remaining + 1, measured_at, deficit)
      end
      if cost <= w.limit then
        if shed and w.low_burst and drops(w, deficit, per_token, cost, shed) then
          fits_at = max(now + 1, fits(per_token, per_ms, capacity, now, shed_need(w, cost), measured_at, deficit))
        else
          fits_at = fits(per_token, per_ms, capacity, now, cost, measured_at, deficit)
        end
      end
      n = append_window(reply, n, remaining, reset_at, fits_at)
    end
    if writes or s[base + 1] then
      write_counter(key, windows, s, base + 1, 2, latest, now, nil)
    end
    return n
  end

  -- Sync's view of a window's measurement and deficit at `at`: none yet is a full bucket measured
  -- then, one measured earlier refills to `at`, one measured later stays as it is (no cap: what
  -- the fleet owes past the capacity stays owed).
  local function as_of(s, i, at, per_ms)
    local measured_at, deficit = s[i], s[i + 1]
    if measured_at == nil then
      return at, 0
    elseif measured_at < at then
      return at, max(0, deficit - (at - measured_at) * per_ms)
    end
    return measured_at, deficit
  end

  -- Folded units (stores/hybrid/bucket-fold.ts) added to every window; returns the whole units pushed
  -- above a limit after all of them.
  local function add_folded(windows, now, folded, s)
    local first, last, units = min(folded[1], now), min(folded[2], now), folded[3]
    local over = 0
    for k = 1, #windows do
      local w, i = windows[k], 2 * k - 1
      local per_token, per_ms = scale(w)
      local measured_at, deficit = as_of(s, i, first, per_ms)
      local taken = (folded[2] - folded[1] - max(0, last - measured_at)) * per_ms
      deficit = max(folded[2 + 2 * k] + taken, deficit + folded[3 + 2 * k] + taken)
      s[i], s[i + 1] = max(measured_at, last), deficit
      local above = pushed_above(units, floor(deficit / per_token), w.limit)
      if above > over then
        over = above
      end
    end
    return over
  end

  -- Sync (sync.lua): the key's value `raw` (GET's answer) plus a process's segments, each `units`
  -- (negative: a refund) admitted at `at`, without a check: they were admitted already. A segment
  -- older than the bucket's last measurement counts as of that measurement, which refills it no
  -- more than it should. The deficit may pass the capacity: units the
  -- fleet admitted past it stay owed, so that every process refills them before admitting again,
  -- instead of each spending the whole refill on its own. State a faster clock stamped is moved
  -- back to now first, as a decision moves it. Returns the whole units pushed above a limit, and
  -- the value the key holds after ('' for none). With `folded`, `segments` holds the units folded
  -- into `first last units floor shift floor shift …` (stores/hybrid/bucket-fold.ts): per window the
  -- deficit refilled to `first` becomes max(floor, deficit + shift), which is what the segments
  -- one by one would make of it. When the bucket was measured after `first` (by another process
  -- or a RedisStore), the refill the fold counted before that measurement, which the deficit
  -- holds already, is taken back, so the units never count for less than the segments would.
  function module.sync(key, raw, windows, now, segments, s, folded, absent)
    parse_counter(raw, windows, s, 0, 2, legacy)
    local moved = false
    for k = 1, #windows do
      local i = 2 * k - 1
      if s[i] ~= nil and s[i] > now then
        s[i], moved = now, true
      end
    end
    if #segments == 0 and not moved then
      return 0, raw or ''
    end
    local over
    if folded then
      over = add_folded(windows, now, segments, s)
    else
      over = add_segments(windows, now, segments, function(k, at, units)
        local w, i = windows[k], 2 * k - 1
        local per_token, per_ms = scale(w)
        local measured_at, deficit = as_of(s, i, at, per_ms)
        deficit = max(0, deficit + units * per_token)
        s[i], s[i + 1] = measured_at, deficit
        return pushed_above(units, floor(deficit / per_token), w.limit)
      end)
    end
    local latest = 0
    for k = 1, #windows do
      local i = 2 * k - 1
      if s[i] ~= nil and s[i + 1] > 0 then
        local _, per_ms = scale(windows[k])
        latest = max(latest, s[i] + ceil(s[i + 1] / per_ms))
      end
    end
    return over, write_counter(key, windows, s, 0, 2, latest, now, nil, absent) or ''
  end

  return module
end
