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
--
-- With `expiry_first`, the first compact number is the entry's expiry: every write gives the key
-- that expiry as its TTL, so a write whose entry keeps the expiry it read (a charge within the
-- same window) keeps the key's TTL as it is, a cheaper SET. A rule edited since the key was
-- written cannot make that wrong: the number is the key's own expiry, whatever period set it.
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

  -- A whole consume or peek of a one-window rule, its key holding `raw`: the steps above with
  -- the entry in locals and no state table. Appends the reply to `reply` after `n` and returns
  -- its new length, or returns nil, having written nothing, when the key holds anything but one
  -- entry of this window (a rule edited since it was written), to leave it to the general path.
  local function general_one(key, w, now, cost, peek, reply, n, raw)
    local a, b, c, stored_first
    if raw then
      if string.find(raw, ' ', 1, true) then
        -- One entry too large to pack is text, `period a b [c]`; anything else goes the general way.
        local period
        if arity == 2 then
          period, a, b = string.match(raw, '^(%d+) (%d+) (%d+)$')
        else
          period, a, b, c = string.match(raw, '^(%d+) (%d+) (%d+) (%d+)$')
        end
        if tonumber(period) ~= w.period then
          return nil
        end
        a, b, c = tonumber(a), tonumber(b), tonumber(c)
      else
        local n1, n2, n3 = unpack_digits(raw, arity)
        stored_first = n1
        a, b, c = steps.from_compact(w, n1, n2, n3)
      end
    end
    a, b, c = current(w, now, a, b, c)
    local fits_now = fits(w, now, cost, a, b, c)
    local allowed = fits_now == now
    if allowed and cost > 0 and not peek then
      a, b, c = steps.charge(w, now, cost, a, b, c)
      local expiry = steps.expires(w, a, b, c)
      if expiry <= now then
        redis.call('DEL', key)
      else
        local value = pack_digits(steps.to_compact(w, a, b, c))
        if value and steps.expiry_first and expiry == stored_first then
          redis.call('SET', key, value, 'KEEPTTL')
        else
          redis.call('SET', key, value or entry_text(w, a, b, c), 'PX', expiry - now)
        end
      end
      fits_now = fits(w, now, cost, a, b, c)
    end
    local left, reset_at = remaining(w, now, a, b, c), now
    if left < w.limit then
      reset_at = fits(w, now, left + 1, a, b, c)
    end
    return append_one(reply, n, allowed, now, left, reset_at, fits_now)
  end

  -- An algorithm may decide a compact or absent state by hand, `steps.one(key, w, now, cost,
  -- peek, reply, n, raw)`, its steps inlined: their dozen Lua calls per decision were a sixth of
  -- a fixed window's Redis time. Text states still take the general way.
  local by_hand = steps.one
  function module.one(key, w, now, cost, peek, reply, n)
    local raw = redis.call('GET', key)
    if by_hand and not (raw and string.find(raw, ' ', 1, true)) then
      return by_hand(key, w, now, cost, peek, reply, n, raw)
    end
    return general_one(key, w, now, cost, peek, reply, n, raw)
  end

  return module
end
