-- The module interface decide.lua uses (see there), built once for each counter algorithm from
-- its numeric steps. A counter keeps, per window, an entry of `arity` numbers (a, b[, c]); the
-- steps take and return them as plain values, so a decision makes no table per window:
--
--   clamp(w, now, a, b, c)           the stored entry with whatever a faster clock stamped after
--                                    now moved back to now (algorithms/algorithm.ts)
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
--                                    Lua calls per decision cost a fixed window measurable Redis
--                                    time (bench/README.md)
--
-- A key's state is a run of a flat table from `base` on: window k's entry at base + (k - 1) ×
-- arity + 1 onwards, k being the window's place in its rule (its `position`). One table can so hold
-- every target of a decision, one after another.

local function counter_module(steps)
  local arity = steps.arity
  local current, fits, remaining, charge = steps.current, steps.fits, steps.remaining, steps.charge
  local module = { arity = arity }

  local function put(state, i, a, b, c)
    state[i + 1], state[i + 2] = a, b
    if arity == 3 then
      state[i + 3] = c
    end
  end

  -- The general path's access to one window's entry of a state that starts at 1.
  local function entry(state, w)
    local i = (w.position - 1) * arity
    if arity == 2 then
      return state[i + 1], state[i + 2]
    end
    return state[i + 1], state[i + 2], state[i + 3]
  end

  -- Moves window k's stored entry back to `now` if a faster clock stamped it later; true if so.
  local function clamp(state, base, windows, k, now)
    local i = base + (k - 1) * arity
    local a, b = state[i + 1], state[i + 2]
    if a == nil then
      return false
    end
    local a2, b2, c2 = steps.clamp(windows[k], now, a, b, state[i + 3])
    if a2 == a and b2 == b then
      return false
    end
    put(state, i, a2, b2, c2)
    return true
  end

  -- Reads the key's stored entries into `state` from `base` on; a window with none gets nils.
  -- With `now` (not for an undo, whose time is past), entries stamped later are moved back to
  -- it: then the key must be written even if nothing is charged, and this returns true.
  local function read(key, windows, state, base, now)
    local count = #windows
    for i = base + 1, base + count * arity do
      state[i] = nil
    end
    local raw = redis.call('GET', key)
    if not raw then
      return false
    end
    if not string.find(raw, ' ', 1, true) then
      local first = windows[1]
      put(state, base, steps.from_compact(first, unpack_digits(raw, arity)))
      return now ~= nil and clamp(state, base, windows, 1, now)
    end
    -- Entries are found by period: a period the rule no longer has is dropped at the next write.
    -- A scan with plain finds: gmatch would build an iterator and a capture per number.
    local at, size = 1, #raw
    while at <= size do
      local stop = string.find(raw, ' ', at, true)
      local period = tonumber(string.sub(raw, at, stop - 1))
      at = stop + 1
      stop = string.find(raw, ' ', at, true)
      local a = tonumber(string.sub(raw, at, stop - 1))
      at = stop + 1
      stop = string.find(raw, ' ', at, true) or size + 1
      local b = tonumber(string.sub(raw, at, stop - 1))
      local c
      if arity == 3 then
        at = stop + 1
        stop = string.find(raw, ' ', at, true) or size + 1
        c = tonumber(string.sub(raw, at, stop - 1))
      end
      for k = 1, #windows do
        if windows[k].period == period then
          put(state, base + (k - 1) * arity, a, b, c)
        end
      end
      at = stop + 1
    end
    local moved = false
    if now then
      for k = 1, count do
        moved = clamp(state, base, windows, k, now) or moved
      end
    end
    return moved
  end

  -- Writes the entries held from `base` on, with the latest of their expiries as the key's TTL:
  -- compact for one window, else `period v1 v2 …` for each window that has an entry.
  local function write(key, state, base, windows, now)
    local latest, count = 0, #windows
    for k = 1, count do
      local i = base + (k - 1) * arity
      if state[i + 1] ~= nil then
        latest = max(latest, steps.expires(windows[k], state[i + 1], state[i + 2], state[i + 3]))
      end
    end
    local ttl = latest - now
    if ttl <= 0 then
      redis.call('DEL', key)
      return
    end
    local value
    if count == 1 then
      value = pack_digits(steps.to_compact(windows[1], state[base + 1], state[base + 2], state[base + 3]))
    end
    if not value then
      value = ''
      for k = 1, count do
        local i = base + (k - 1) * arity
        if state[i + 1] ~= nil then
          local text = fmt(windows[k].period) .. ' ' .. fmt(state[i + 1]) .. ' ' .. fmt(state[i + 2])
          if arity == 3 then
            text = text .. ' ' .. fmt(state[i + 3])
          end
          value = value == '' and text or value .. ' ' .. text
        end
      end
    end
    -- Redis prints a number argument with '%.17g', exact for any integer a double holds.
    redis.call('SET', key, value, 'PX', ttl)
  end

  -- `now` is nil for an undo (see read); `dirty` says the state must be written.
  function module.load(key, windows, now)
    local state = {}
    state.dirty = read(key, windows, state, 0, now)
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
      put(state, (w.position - 1) * arity, step(w, now, cost, current(w, now, entry(state, w))))
    end
    return state
  end

  function module.charge(state, windows, now, cost)
    return apply(charge, state, windows, now, cost)
  end

  function module.refund(state, windows, now, cost)
    return apply(steps.refund, state, windows, now, cost)
  end

  function module.undo(state, windows, now, cost)
    for k = 1, #windows do
      local w = windows[k]
      if entry(state, w) ~= nil then
        put(state, (w.position - 1) * arity, steps.undo(w, now, cost, entry(state, w)))
      end
    end
    return state
  end

  function module.save(key, state, windows, now)
    write(key, state, 0, windows, now)
  end

  -- A consume or peek over several targets or windows, in two passes so that nothing is written
  -- before every window of every target is known to fit (decide.lua). check reads a target into
  -- `state` from `base` on, as of now, and says whether the cost fits all its windows; finish
  -- charges it if `charges`, and appends its windows' reply. Entries are indexed directly and
  -- made current once: through the interface above, a window took some twenty Lua calls.
  function module.check(key, windows, now, cost, state, base)
    local moved = read(key, windows, state, base, now)
    local fit = true
    for k = 1, #windows do
      local w, i = windows[k], base + (k - 1) * arity
      -- With an arity of 2, c is the next entry's first number, which two-number steps ignore.
      local a, b, c = current(w, now, state[i + 1], state[i + 2], state[i + 3])
      put(state, i, a, b, c)
      if fit and fits(w, now, cost, a, b, c) ~= now then
        fit = false
      end
    end
    return fit, moved
  end

  -- `moved`: check moved an entry back to now, so the key is written even if nothing is charged.
  function module.finish(key, windows, now, cost, charges, state, base, reply, n, moved)
    for k = 1, #windows do
      local w, i = windows[k], base + (k - 1) * arity
      local a, b, c = state[i + 1], state[i + 2], state[i + 3]
      if charges then
        a, b, c = charge(w, now, cost, a, b, c)
        put(state, i, a, b, c)
      end
      local left, reset_at = remaining(w, now, a, b, c), now
      if left < w.limit then
        reset_at = fits(w, now, left + 1, a, b, c)
      end
      n = append_window(reply, n, left, reset_at, fits(w, now, cost, a, b, c))
    end
    if charges or moved then
      write(key, state, base, windows, now)
    end
    return n
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
