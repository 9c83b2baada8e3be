-- What the two scripts of processes deciding in their own memory (sync.lua, lease.lua) share:
-- the call's time, the process's heartbeat, and the text of a key's failure.

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

-- The text of what a protected call on one key raised: a command's error reply (a table) or a
-- script's own error.
local function failure_text(failure)
  return tostring(type(failure) == 'table' and failure.err or failure)
end
