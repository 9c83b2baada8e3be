-- Adds what processes deciding in their own memory (HybridStore) admitted since they last
-- synced to the keys the decide script keeps, and answers each key's value before and after, so
-- that the process can carry on from the fleet's totals. Every key is written as decide.lua
-- would write it, so a RedisStore on the same keys sees the units, and this sees its charges.
--
-- KEYS     [the instances key, when ARGV[2] is not ''], then one state key per entry; a
--          fixed-window entry's side key is its key with ':prev' appended, which shares its hash
--          tag and so its Cluster slot
-- ARGV     [1] now: ms, or '-' for the server's TIME
--          [2] 'instance ttl_ms': this process is alive (a sorted set of instances, members
--              older than ttl_ms dropped), or ''
--          then one entry per key: 'code limit period limit period …|at units at units …',
--          segments in time order, units negative for a refund; no segment: only read
-- Reply    server time in ms, the number of live instances (-1 without a heartbeat), then per
--          entry: value before, value after ('' for no key), units pushed above a limit

--#include lib/numbers.lua
--#include lib/counter_state.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua

local KEYS, ARGV = KEYS, ARGV
local modules = { fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module }
local built = {}
local time = call('TIME')
local server_now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
local now = server_now
if ARGV[1] ~= '-' then
  now = tonumber(ARGV[1])
  -- Whole ms from 0 to 8.64e15 (clock.ts): anything else would corrupt every window it touched.
  if not now or now ~= floor(now) or now < 0 or now > 8640000000000000 then
    error('the clock sent ' .. ARGV[1] .. ' as the time; a time is whole milliseconds from 0 to 8640000000000000')
  end
end

local reply, key = { server_now, -1 }, 1
if ARGV[2] ~= '' then
  local instance, ttl = string.match(ARGV[2], '^(%S+) (%d+)$')
  ttl = tonumber(ttl)
  call('ZADD', KEYS[1], now, instance)
  call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
  call('PEXPIRE', KEYS[1], ttl)
  reply[2] = call('ZCARD', KEYS[1])
  key = 2
end

-- `scratch` takes the reply a decision's finish appends, which a sync does not answer.
local s, segments, scratch = {}, {}, {}
for arg = 3, #ARGV do
  local code, rest, pushed = string.match(ARGV[arg], '^(%a+) ([^|]*)|(.*)$')
  local module = built[code]
  if not module then
    module = modules[code]()
    built[code] = module
  end
  local windows = {}
  for limit, period in string.gmatch(rest, '(%d+) (%d+)') do
    windows[#windows + 1] = { limit = tonumber(limit), period = tonumber(period) }
  end
  local count = 0
  for number in string.gmatch(pushed, '%S+') do
    count = count + 1
    segments[count] = tonumber(number)
  end
  for j = count + 1, #segments do
    segments[j] = nil
  end
  local name = KEYS[key]
  local before, over = redis.pcall('GET', name), 0
  if type(before) == 'table' then
    -- A key of another type (WRONGTYPE) fails its entry alone: '!' and what Redis said.
    before, count = '!' .. tostring(before.err), 0
  elseif before then
    -- State a faster clock stamped ahead of now is moved back to now and written, exactly as a
    -- decision's read does: otherwise every process would take it back from Redis at each sync
    -- and hold the identifier for the whole skew.
    module.check(name, windows, now, 0, 'peek', s, 0)
    if s[1] == true then
      module.finish(name, windows, now, 0, 'peek', false, s, 0, scratch, 0)
      before = call('GET', name) or ''
    end
  end
  before = before or ''
  if count > 0 then
    if code == 'fw' then
      over = module.add(name, name .. ':prev', windows, now, segments, s)
    else
      over = module.add(name, windows, now, segments, s)
    end
  end
  local after = before
  if count > 0 then
    after = call('GET', name) or ''
  end
  reply[#reply + 1], reply[#reply + 2], reply[#reply + 3] = before, after, over
  key = key + 1
end
return reply
