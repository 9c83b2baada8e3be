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

-- The segments 'at units at units …' of `text` from `from` to `to` (bounds included) read into
-- `segments`, whose old cells beyond are cleared; returns how many numbers it holds. Plain finds:
-- gmatch would build an iterator and a capture per number.
local function read_segments(text, segments, from, to)
  local count, position = 0, from or 1
  to = to or #text
  while position <= to do
    local stop = find(text, ' ', position, true)
    if not stop or stop > to then
      stop = to + 1
    end
    count = count + 1
    segments[count] = tonumber(sub(text, position, stop - 1))
    position = stop + 1
  end
  for j = count + 1, #segments do
    segments[j] = nil
  end
  return count
end

-- The segments added to the key `name`, whose value is `raw`, by its rule's module; `folded`: a
-- bucket's units come folded (lib/bucket.lua); `absent`: `raw` came from MGET (write_counter).
-- Returns the module's sync answer.
local function add_to_key(rule, name, raw, now, segments, s, folded, absent)
  if rule.code == 'fw' then
    return rule.module.sync(name, raw, rule.windows, now, segments, s, absent)
  end
  return rule.module.sync(name, raw, rule.windows, now, segments, s, folded, absent)
end
