-- What the two scripts of processes deciding in their own memory (sync.lua, lease.lua) share:
-- the call's time, the process's heartbeat, and their rule text.

-- The server's time, and the call's: ARGV's `text` in ms, or '-' for the server's.
local function call_time(text)
  local time = call('TIME')
  local server_now = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
  if text == '-' then
    return server_now, server_now
  end
  local now = tonumber(text)
  -- Whole ms from 0 to 8.64e15 (clock.ts): anything else would corrupt every window it touched.
  if not now or now ~= floor(now) or now < 0 or now > 8640000000000000 then
    error('the clock sent ' .. text .. ' as the time; a time is whole milliseconds from 0 to 8640000000000000')
  end
  return server_now, now
end

-- 'instance ttl_ms': the instance is alive (a sorted set of instances, members older than ttl_ms
-- dropped). Returns how many are.
local function heartbeat(key, text, now)
  local instance, ttl = string.match(text, '^(%S+) (%d+)$')
  ttl = tonumber(ttl)
  call('ZADD', key, now, instance)
  call('ZREMRANGEBYSCORE', key, '-inf', now - ttl)
  call('PEXPIRE', key, ttl)
  return call('ZCARD', key)
end

-- 'code limit period limit period …', each text parsed once per call; its module built once.
local function sync_rules(modules)
  local built, rules = {}, {}
  return function(text)
    local rule = rules[text]
    if rule then
      return rule
    end
    local code, rest = string.match(text, '^(%a+) (.*)$')
    local module = built[code]
    if not module then
      module = modules[code]()
      built[code] = module
    end
    local windows = {}
    for limit, period in string.gmatch(rest, '(%d+) (%d+)') do
      windows[#windows + 1] = { limit = tonumber(limit), period = tonumber(period) }
    end
    rule = { code = code, module = module, windows = windows }
    rules[text] = rule
    return rule
  end
end

-- An entry's segments 'at units at units …' read into `segments`, whose old cells beyond are
-- cleared; returns how many numbers it holds.
local function read_segments(text, segments)
  local count = 0
  for number in string.gmatch(text, '%S+') do
    count = count + 1
    segments[count] = tonumber(number)
  end
  for j = count + 1, #segments do
    segments[j] = nil
  end
  return count
end

-- The segments added to the key `name`, whose value is `raw`, by its rule's module; a fixed
-- window's side key is its key with ':prev' appended. Returns the module's sync answer.
local function add_to_key(rule, name, raw, now, segments, s)
  if rule.code == 'fw' then
    return rule.module.sync(name, raw, name .. ':prev', rule.windows, now, segments, s)
  end
  return rule.module.sync(name, raw, rule.windows, now, segments, s)
end
