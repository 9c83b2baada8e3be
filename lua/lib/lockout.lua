-- Lockouts (a rule's `block`), the same steps as algorithms/lockout.ts: what a rule with a block
-- keeps per identifier, in the key beside its state's ('<key>:block'), as the text
-- 'until last_ms refusals first_at window':
--   until      when the block in force, or the last one, ends (ms); 0 before any
--   last_ms    how long that block lasted: a next one within as long after it ends lasts
--              `factor` times longer, up to `max`
--   refusals   refusals by the windows since first_at, toward `after`
--   window     the window (from 0) whose refusal started the block: a blocked decision marks it
-- A block travels after its target's rule text as '#for after factor max' (ms, ms).

local function lockout_spec(text)
  local for_ms, after, factor, max_ms = string.match(text, '^(%d+) (%d+) ([%d.e+]+) (%d+)$')
  if not for_ms then
    error('unreadable block ' .. text)
  end
  return { for_ms = tonumber(for_ms), after = tonumber(after), factor = tonumber(factor), max_ms = tonumber(max_ms) }
end

local function lockout_read(key)
  local raw = call('GET', key)
  if not raw then
    return false
  end
  local until_at, last, refusals, first_at, window = string.match(raw, '^(%d+) (%d+) (%d+) (%d+) (%d+)$')
  if not until_at then
    error('the block at ' .. key .. ' is unreadable')
  end
  return {
    until_at = tonumber(until_at),
    last = tonumber(last),
    refusals = tonumber(refusals),
    first_at = tonumber(first_at),
    window = tonumber(window),
  }
end

-- When the identifier's block ends, if one is in force at now; 0 if none is.
local function lockout_until(state, now)
  if state and state.until_at > now then
    return state.until_at
  end
  return 0
end

local function longest_period(windows)
  local longest = 0
  for k = 1, #windows do
    longest = max(longest, windows[k].period)
  end
  return longest
end

-- The state after window `window` (from 0) refused at now, with no block in force.
local function lockout_after_refusal(state, block, windows, now, window)
  local counting = state and state.refusals > 0 and now < state.first_at + longest_period(windows)
  local refusals, first_at = 1, now
  if counting then
    refusals, first_at = state.refusals + 1, state.first_at
  end
  local last_until, last = 0, 0
  if state then
    last_until, last = state.until_at, state.last
  end
  if refusals < block.after then
    return { until_at = last_until, last = last, refusals = refusals, first_at = first_at, window = state and state.window or 0 }
  end
  local length = block.for_ms
  if last > 0 and now < last_until + last then
    length = min(block.max_ms, floor(last * block.factor))
  end
  return { until_at = now + length, last = length, refusals = 0, first_at = 0, window = window }
end

local function lockout_write(key, state, windows, now)
  local expires_at = 0
  if state.last > 0 then
    expires_at = state.until_at + state.last
  end
  if state.refusals > 0 then
    expires_at = max(expires_at, state.first_at + longest_period(windows))
  end
  if expires_at <= now then
    call('DEL', key)
    return
  end
  local text = fmt(state.until_at) .. ' ' .. fmt(state.last) .. ' ' .. fmt(state.refusals) .. ' ' .. fmt(state.first_at) .. ' ' .. fmt(state.window)
  call('SET', key, text, 'PX', expires_at - now)
end
