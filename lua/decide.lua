-- Decides a batch of decisions, each atomically: checks, and for `consume` charges, every window
-- of every target of one decision, all or nothing. If any window cannot fit `cost`, nothing of
-- that decision is written anywhere. Batching lets one EVALSHA carry every decision a process
-- made in the same turn of its event loop: one write, one script call, one TIME for all of them.
--
-- KEYS     the targets' state keys, decision after decision; a target is one rule × one
--          identifier and its key holds all the rule's windows
-- ARGV     one per decision: 'operation cost now spec|spec|…', one spec per key of the decision
--            operation  'consume', 'peek', 'refund', or 'undo' (take back a consume this decision
--                       made at `now` on some slots of a Cluster when another slot refused)
--            cost       an integer ≥ 0
--            now        milliseconds, or '-' for the server's TIME (immune to app servers' skew)
--            spec       'code limit period limit period …' with code 'sl', 'fw', 'sw' or 'tb'
--          Decisions of one rule in one batch send the same text, which is parsed once.
-- Reply    one flat array, decision after decision: either now × 2 + allowed (1 or 0), then per
--          window in order remaining, reset_at, fits_at, with fits_at = -1 when the cost can never
--          fit, every number an integer; or one string, the error that decision met (one bad key
--          fails only its own decision, and it fails before anything of it is written). Flat,
--          because Redis converts a nested table per decision at about twice the cost, and now
--          shares an integer with allowed because each integer of the reply costs Redis time.
--
-- Each algorithm module offers load(key, windows), fits_at(state, w, now, need), remaining(state,
-- w, now), charge(state, windows, now, cost), refund(…), undo(…) and save(key, state, windows,
-- now): the same steps as the TypeScript models that the in-memory store runs (undo has no
-- counterpart there: one process never splits a decision). Each also offers one(key, w, now,
-- cost, peek, reply, n): a consume or peek of a single one-window target, the commonest decision,
-- with its numbers in locals. The counter algorithms get all of these from counter_module.lua,
-- which adds check and finish: a consume or peek of several targets or windows in two passes
-- over one shared table (decide_checked below).

--#include lib/numbers.lua
--#include lib/reply.lua
--#include lib/counters.lua
--#include lib/counter_module.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua
--#include lib/sliding_log.lua

local modules = { sl = sliding_log_module, fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module }
local algorithms = {}
-- Decisions of one batch mostly share their rules: each spec is parsed once per batch.
local parsed_specs = {}
local parsed_requests = {}

local function spec_of(text)
  local spec = parsed_specs[text]
  if spec then
    return spec
  end
  local code, rest = string.match(text, '^(%a+) (.*)$')
  local algorithm = algorithms[code]
  if not algorithm then
    algorithm = modules[code]()
    algorithms[code] = algorithm
  end
  local windows = {}
  for limit, period in string.gmatch(rest, '(%d+) (%d+)') do
    windows[#windows + 1] = { limit = tonumber(limit), period = tonumber(period), position = #windows + 1 }
  end
  spec = { algorithm = algorithm, windows = windows }
  parsed_specs[text] = spec
  return spec
end

local function request_of(text)
  local request = parsed_requests[text]
  if request then
    return request
  end
  local operation, cost, now, rest = string.match(text, '^(%a+) (%d+) (%S+) (.*)$')
  local specs = {}
  for spec in string.gmatch(rest, '[^|]+') do
    specs[#specs + 1] = spec_of(spec)
  end
  local keys, width = #specs, 1
  for i = 1, keys do
    width = width + 3 * #specs[i].windows
  end
  request = { operation = operation, cost = tonumber(cost), specs = specs, keys = keys, width = width }
  if now ~= '-' then
    request.now = tonumber(now)
    -- Whole ms from 0 to 8.64e15 (clock.ts): anything else would admit or refuse everything.
    if not request.now or request.now ~= floor(request.now) or request.now < 0 or request.now > 8640000000000000 then
      request.bad_now = now
    end
  end
  local first = specs[1]
  local checks = operation == 'consume' or operation == 'peek'
  request.peek = operation == 'peek'
  if keys == 1 and #first.windows == 1 and first.algorithm.one and checks then
    request.one, request.window = first.algorithm.one, first.windows[1]
  elseif checks then
    request.checked = true
    for i = 1, keys do
      request.checked = request.checked and specs[i].algorithm.check ~= nil
    end
  end
  parsed_requests[text] = request
  return request
end

local server_now
local function now_of(request)
  if request.bad_now then
    error('the clock sent ' .. request.bad_now .. ' as the time; a time is whole milliseconds from 0 to 8640000000000000')
  end
  if request.now then
    return request.now
  end
  if not server_now then
    local time = redis.call('TIME')
    server_now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
  end
  return server_now
end

-- The decision whose keys start at KEYS[key], its reply appended to `reply` after `n`; returns
-- the reply's new length. Plain numeric loops and few tables: this runs once per decision, and
-- Lua's allocations and ipairs calls would otherwise cost more than the Redis commands it makes.
local function decide(request, key, reply, n)
  local operation, cost, now, specs = request.operation, request.cost, now_of(request), request.specs
  local count = #specs
  local targets = {}
  -- Every key is read before any is written: a key that cannot be read (WRONGTYPE) fails the
  -- decision with nothing of it written. An undo's time is past: it moves nothing back to it.
  local clamp_to = now
  if operation == 'undo' then
    clamp_to = nil
  end
  for i = 1, count do
    local target = specs[i]
    local name = KEYS[key + i - 1]
    targets[i] = { name, target, target.algorithm.load(name, target.windows, clamp_to) }
  end

  local checks = operation == 'consume' or operation == 'peek'
  local allowed = true
  if checks then
    for i = 1, count do
      local target = targets[i]
      local fits_at, windows, state = target[2].algorithm.fits_at, target[2].windows, target[3]
      for j = 1, #windows do
        if fits_at(state, windows[j], now, cost) ~= now then
          allowed = false
          break
        end
      end
      if not allowed then
        break
      end
    end
  end

  local writes = cost > 0 and operation ~= 'peek' and (allowed or not checks)
  reply[n + 1] = floor(now) * 2 + (allowed and 1 or 0)
  n = n + 1
  for i = 1, count do
    local target = targets[i]
    local algorithm, windows, state = target[2].algorithm, target[2].windows, target[3]
    if writes then
      if operation == 'consume' then
        state = algorithm.charge(state, windows, now, cost)
      else
        state = algorithm[operation](state, windows, now, cost)
      end
      algorithm.save(target[1], state, windows, now)
    elseif state.dirty then
      -- Moved back from a faster clock's stamps when read: written so that it stays moved.
      algorithm.save(target[1], state, windows, now)
    end
    local remaining_of, fits_at = algorithm.remaining, algorithm.fits_at
    for j = 1, #windows do
      local w = windows[j]
      local remaining = remaining_of(state, w, now)
      local reset_at = now
      if remaining < w.limit then
        reset_at = fits_at(state, w, now, remaining + 1)
      end
      n = append_window(reply, n, remaining, reset_at, fits_at(state, w, now, cost))
    end
  end
  return n
end

-- A consume or peek of several targets or windows, all of whose algorithms offer check and
-- finish (the counters): every target is read and checked, then charged if all fit, its entries
-- kept in one table for the whole batch rather than a table per target per decision.
local checked_state = {}
local function decide_checked(request, key, reply, n)
  local cost, now, specs = request.cost, now_of(request), request.specs
  local allowed, base, moved = true, 0, nil
  for i = 1, request.keys do
    local spec = specs[i]
    local fit, clamped = spec.algorithm.check(KEYS[key + i - 1], spec.windows, now, cost, checked_state, base)
    if not fit then
      allowed = false
    end
    if clamped then
      moved = moved or {}
      moved[i] = true
    end
    base = base + spec.algorithm.arity * #spec.windows
  end
  local charges = allowed and cost > 0 and not request.peek
  reply[n + 1] = floor(now) * 2 + (allowed and 1 or 0)
  n, base = n + 1, 0
  for i = 1, request.keys do
    local spec = specs[i]
    n = spec.algorithm.finish(
      KEYS[key + i - 1],
      spec.windows,
      now,
      cost,
      charges,
      checked_state,
      base,
      reply,
      n,
      moved ~= nil and moved[i]
    )
    base = base + spec.algorithm.arity * #spec.windows
  end
  return n
end

local reply, n, key, arg = {}, 0, 1, 1
-- The decision being decided: kept outside so that its failure can be answered.
local request

-- Decides ARGV[arg] onwards, or raises from the decision that failed, with n, key and arg still
-- at its start. One pcall per batch rather than one per decision: a decision costs a few
-- microseconds, and pcall a tenth of that.
local function decide_from()
  while arg <= #ARGV do
    request = nil
    request = request_of(ARGV[arg])
    local length
    if request.one then
      length = request.one(KEYS[key], request.window, now_of(request), request.cost, request.peek, reply, n)
    end
    if not length then
      if request.checked then
        length = decide_checked(request, key, reply, n)
      else
        length = decide(request, key, reply, n)
      end
    end
    n, key, arg = length, key + request.keys, arg + 1
  end
end

while true do
  local ok, failure = pcall(decide_from)
  if ok then
    break
  end
  -- A malformed argument fails the whole call: where its decision's keys end is unknown.
  if not request then
    error(failure)
  end
  -- Redis raises its command errors as { err = message }; ours are plain strings.
  if type(failure) == 'table' and failure.err then
    failure = failure.err
  end
  n = n + 1
  reply[n] = tostring(failure)
  -- Nothing a failed decision wrote of its reply may stay.
  for i = n + 1, n + request.width do
    reply[i] = nil
  end
  key, arg = key + request.keys, arg + 1
end
return reply
