--#include lib/numbers.lua
--#include lib/counters.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua
--#include lib/sliding_log.lua
local modules = { sl = sliding_log_module, fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module }
local algorithms = {}
-- Decisions of one batch mostly share their rules: each spec is parsed once per batch.
local parsed_specs = {}
local parsed_headers = {}

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
    windows[#windows + 1] = { limit = tonumber(limit), period = tonumber(period) }
  end
  spec = { algorithm = algorithm, windows = windows }
  parsed_specs[text] = spec
  return spec
end

local function header_of(text)
  local header = parsed_headers[text]
  if header then
    return header
  end
  local operation, cost, now, rest = string.match(text, '^(%a+) (%d+) (%S+) (.*)$')
  local specs = {}
  for spec in string.gmatch(rest, '[^|]+') do
    specs[#specs + 1] = spec_of(spec)
  end
  local keys, width = #specs, 2
  for i = 1, keys do
    width = width + 3 * #specs[i].windows
  end
  header = { operation = operation, cost = tonumber(cost), now = tonumber(now), specs = specs, keys = keys, width = width }
  local first = specs[1]
  if keys == 1 and #first.windows == 1 and first.algorithm.one and (operation == 'consume' or operation == 'peek') then
    header.one, header.window, header.peek = first.algorithm.one, first.windows[1], operation == 'peek'
  end
  parsed_headers[text] = header
  return header
end

local server_now
local function now_of(header)
  if header.now then
    return header.now
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
local function decide(header, key, reply, n)
  local operation, cost, now, specs = header.operation, header.cost, now_of(header), header.specs
  local count = #specs
  local targets = {}
  for i = 1, count do
    local target = specs[i]
    local name = KEYS[key + i - 1]
    targets[i] = { name, target, target.algorithm.load(name, target.windows) }
  end

  local charging = operation == 'consume' or operation == 'peek'
  local allowed = true
  if charging then
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

  local writes = cost > 0 and operation ~= 'peek' and (allowed or not charging)
  reply[n + 1], reply[n + 2] = allowed and 1 or 0, now
  n = n + 2
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
    end
    local remaining_of, fits_at = algorithm.remaining, algorithm.fits_at
    for j = 1, #windows do
      local w = windows[j]
      local remaining = remaining_of(state, w, now)
      local reset_at = now
      if remaining < w.limit then
        reset_at = fits_at(state, w, now, remaining + 1)
      end
      local fits = fits_at(state, w, now, cost)
      if fits == NEVER then
        fits = -1
      end
      reply[n + 1], reply[n + 2], reply[n + 3] = remaining, reset_at, fits
      n = n + 3
    end
  end
  return n
end

local h = header_of(ARGV[1])
local t = now_of(h)
return {1}
