-- The module interface decide.lua uses (see there), built once for each counter algorithm from
-- its numeric steps. A counter keeps, per window, an entry of `arity` numbers (a, b[, c]); the
-- steps take and return them as plain values, so a decision makes no table per window:
--
--   current(w, now, a, b, c)         the entry as of now, from the stored one (a nil when none)
--   fits(w, now, need, a, b, c)      when `need` units fit, on a current entry (NEVER: never)
--   remaining(w, now, a, b, c)       whole units left, on a current entry
--   charge(w, now, cost, a, b, c)    the entry after a charge, on a current entry
--   refund(w, now, cost, a, b, c)    the same for a refund
--   undo(w, now, cost, a, b, c)      takes back a charge made at `now`, on the stored entry
--   expires(w, a, b, c)              when the entry stops mattering (0: it already has)
--   from_compact(w, n1, n2, n3)      the entry from the compact numbers (counters.lua), and
--   to_compact(w, a, b, c)           back
--   one(key, w, now, cost, peek, reply, n, raw)
--                                    the module's one() (decide.lua) for a key holding `raw`,
--                                    compact or nil: the steps above inlined, since their dozen
--                                    Lua calls per decision were a sixth of a fixed window's
--                                    Redis time
--
-- A key's state is one flat table: window k's entry at positions (k - 1) × arity + 1 onwards, k
-- being the window's place in its rule (its `slot`).

local function counter_module(steps)
  local arity = steps.arity
  local current, fits, remaining = steps.current, steps.fits, steps.remaining
  local module = {}

  local function entry(state, w)
    local base = (w.slot - 1) * arity
    if arity == 2 then
      return state[base + 1], state[base + 2]
    end
    return state[base + 1], state[base + 2], state[base + 3]
  end

  local function put(state, w, a, b, c)
    local base = (w.slot - 1) * arity
    state[base + 1], state[base + 2] = a, b
    if arity == 3 then
      state[base + 3] = c
    end
  end

  -- The text of one entry: its period, then its numbers in entry order.
  local function entry_text(w, a, b, c)
    local text = fmt(w.period) .. ' ' .. fmt(a) .. ' ' .. fmt(b)
    if arity == 3 then
      text = text .. ' ' .. fmt(c)
    end
    return text
  end

  function module.load(key, windows)
    local raw = redis.call('GET', key)
    local state = {}
    if not raw then
      return state
    end
    if not string.find(raw, ' ', 1, true) then
      local first = windows[1]
      put(state, first, steps.from_compact(first, unpack_digits(raw, arity)))
      return state
    end
    -- Entries are found by period: a period the rule no longer has is dropped at the next write.
    -- A scan with plain finds: gmatch would build an iterator and a capture per number.
    local at, size = 1, #raw
    while at <= size do
      local stop = string.find(raw, ' ', at, true)
      local period = tonumber(string.sub(raw, at, stop - 1))
      local values = {}
      for j = 1, arity do
        at = stop + 1
        stop = string.find(raw, ' ', at, true) or size + 1
        values[j] = tonumber(string.sub(raw, at, stop - 1))
      end
      for k = 1, #windows do
        if windows[k].period == period then
          put(state, windows[k], values[1], values[2], values[3])
        end
      end
      at = stop + 1
    end
    return state
  end

  function module.fits_at(state, w, now, need)
    return fits(w, now, need, current(w, now, entry(state, w)))
  end

  function module.remaining(state, w, now)
    return remaining(w, now, current(w, now, entry(state, w)))
  end

  -- Applies `step` (charge or refund) to every window's current entry.
  local function apply(step, state, windows, now, cost)
    for k = 1, #windows do
      local w = windows[k]
      put(state, w, step(w, now, cost, current(w, now, entry(state, w))))
    end
    return state
  end

  function module.charge(state, windows, now, cost)
    return apply(steps.charge, state, windows, now, cost)
  end

  function module.refund(state, windows, now, cost)
    return apply(steps.refund, state, windows, now, cost)
  end

  function module.undo(state, windows, now, cost)
    for k = 1, #windows do
      local w = windows[k]
      if entry(state, w) ~= nil then
        put(state, w, steps.undo(w, now, cost, entry(state, w)))
      end
    end
    return state
  end

  function module.save(key, state, windows, now)
    local latest = 0
    for k = 1, #windows do
      local w = windows[k]
      if entry(state, w) ~= nil then
        latest = max(latest, steps.expires(w, entry(state, w)))
      end
    end
    local ttl = latest - now
    if ttl <= 0 then
      redis.call('DEL', key)
      return
    end
    local value
    if #windows == 1 then
      value = pack_digits(steps.to_compact(windows[1], entry(state, windows[1])))
    end
    if not value then
      value = ''
      for k = 1, #windows do
        local w = windows[k]
        if entry(state, w) ~= nil then
          local text = entry_text(w, entry(state, w))
          value = value == '' and text or value .. ' ' .. text
        end
      end
    end
    -- Redis prints a number argument with '%.17g', exact for any integer a double holds.
    redis.call('SET', key, value, 'PX', ttl)
  end

  -- A key in the text form (a number too large to pack, or a rule edited since) goes the
  -- general way: nil, nothing written.
  function module.one(key, w, now, cost, peek, reply, n)
    local raw = redis.call('GET', key)
    if raw and string.find(raw, ' ', 1, true) then
      return nil
    end
    return steps.one(key, w, now, cost, peek, reply, n, raw)
  end

  return module
end
