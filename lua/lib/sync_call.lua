-- What the two scripts of processes deciding in their own memory (sync.lua, lease.lua) share:
-- the call's time, the process's heartbeat, and how a process's units reach a key.

-- The server's time, and the call's: ARGV's `text` in ms, or '-' for the server's.
local function call_time(text)
  local server_now = server_time_ms()
  if text == '-' then
    return server_now, server_now
  end
  return server_now, sent_time(text) or bad_time(text)
end

-- 'instance ttl_ms': the instance is alive (a sorted set of instances, members older than ttl_ms
-- dropped). Returns how many are.
local function heartbeat(key, text, now)
  local instance, ttl = string.match(text, '^(%S+) (%d+)$')
  ttl = tonumber(ttl)
  call('ZADD', key, now, instance)
  call('ZREMRANGEBYSCORE', key, '-inf', now - ttl)
  expire_in(key, ttl)
  return call('ZCARD', key)
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
-- window's side key is its key with ':prev' appended; `folded`: a bucket's units come folded
-- (lib/bucket.lua). Returns the module's sync answer.
local function add_to_key(rule, name, raw, now, segments, s, folded)
  if rule.code == 'fw' then
    return rule.module.sync(name, raw, name .. ':prev', rule.windows, now, segments, s)
  end
  return rule.module.sync(name, raw, rule.windows, now, segments, s, folded)
end
