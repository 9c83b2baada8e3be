-- Checks, and for `consume` charges, every window of every target of one decision, atomically.
-- All or nothing: if any window cannot fit `cost`, nothing is written anywhere.
--
-- KEYS[i]  state of target i: one rule × one identifier, holding all the rule's windows
-- ARGV[1]  operation: 'consume', 'peek', 'refund', or 'undo' (take back a consume this decision
--          made at ARGV[3] on some slots of a Cluster when another slot refused)
-- ARGV[2]  cost: an integer ≥ 0
-- ARGV[3]  now in milliseconds, or '' to use the server's TIME (immune to app servers' skew)
-- ARGV[4…] per target: algorithm code ('sl', 'fw', 'sw', 'tb'), window count n, then n pairs
--          of limit and period in milliseconds
-- Reply    { allowed (1 or 0), now, then per window in order: remaining, reset_at, fits_at }
--          with fits_at = -1 when the cost can never fit; every number an integer
--
-- Each algorithm module offers load(key), fits_at(state, w, now, need), remaining(state, w,
-- now), charge(state, windows, now, cost), refund(…), undo(…) and save(key, state, windows,
-- now): the same steps as the TypeScript models that the in-memory store runs (undo has no
-- counterpart there: one process never splits a decision).

--#include lib/numbers.lua
--#include lib/counters.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua
--#include lib/sliding_log.lua

local modules = { sl = sliding_log_module, fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module }
local algorithms = {}

local operation = ARGV[1]
local cost = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if not now then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

local targets = {}
local arg = 4
for i = 1, #KEYS do
  local code = ARGV[arg]
  local algorithm = algorithms[code]
  if not algorithm then
    algorithm = modules[code]()
    algorithms[code] = algorithm
  end
  local count = tonumber(ARGV[arg + 1])
  local windows = {}
  arg = arg + 2
  for j = 1, count do
    windows[j] = { limit = tonumber(ARGV[arg]), period = tonumber(ARGV[arg + 1]) }
    arg = arg + 2
  end
  targets[i] = { key = KEYS[i], algorithm = algorithm, windows = windows, state = algorithm.load(KEYS[i]) }
end

local charging = operation == 'consume' or operation == 'peek'
local allowed = true
if charging then
  for _, target in ipairs(targets) do
    for _, w in ipairs(target.windows) do
      if target.algorithm.fits_at(target.state, w, now, cost) ~= now then
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
local reply = { 0, now }
if allowed then
  reply[1] = 1
end
for _, target in ipairs(targets) do
  local algorithm, state = target.algorithm, target.state
  if writes then
    if operation == 'consume' then
      state = algorithm.charge(state, target.windows, now, cost)
    else
      state = algorithm[operation](state, target.windows, now, cost)
    end
    algorithm.save(target.key, state, target.windows, now)
  end
  for _, w in ipairs(target.windows) do
    local remaining = algorithm.remaining(state, w, now)
    local reset_at = now
    if remaining < w.limit then
      reset_at = algorithm.fits_at(state, w, now, remaining + 1)
    end
    local fits_at = algorithm.fits_at(state, w, now, cost)
    if fits_at == NEVER then
      fits_at = -1
    end
    reply[#reply + 1] = remaining
    reply[#reply + 1] = reset_at
    reply[#reply + 1] = fits_at
  end
end
return reply
