-- Publishes a change of live rules (packages/core/src/live-rules/): compare-and-set on the epoch
-- and the id of the publish that made it, then every rule changed, the new epoch and its id, a
-- history entry and a nudge, as one atomic step. Rule options arrive as JSON the publisher
-- validated; they are stored and recorded as they are, never decoded here (cjson would turn a
-- limit of 2^53 - 1 into a float).
--
-- KEYS     [1] epoch (string: the number of publishes), [2] rules (hash: rule name, options
--          JSON), [3] changed (sorted set: rule name, scored by the epoch that last changed it, a
--          dropped rule included), [4] history (list of JSON entries, newest first), [5] ids
--          (hash: epoch, the id of the publish that made it, for the last ARGV[5] epochs); all
--          five share the hash tag {rules}, and so a Cluster slot
-- ARGV     [1] the epoch the change was validated against
--          [2] the id of the publish that made that epoch ('' for none recorded)
--          [3] this publish's id: random, so that two publishes never share one, even when a
--          failover lost the first and the second makes the same epoch again
--          [4] the channel to nudge followers on
--          [5] how many history entries, and epoch ids, to keep
--          [6] JSON members added to the history entry ('' or ',"rollbackOf":N')
--          [7] the changes: a JSON array of strings, rule name then options JSON ('' drops the
--          rule's override), pair after pair. One argument, not one per string: a client that
--          spreads hundreds of thousands of arguments into one call runs out of stack.
-- Reply    { 1, the new epoch }, or { 0, the epoch found } when it was not ARGV[1], or was made
--          by another publish than ARGV[2]: nothing written

--#include lib/time.lua

local call = redis.call
local epoch = tonumber(call('GET', KEYS[1]) or '0')
if epoch ~= tonumber(ARGV[1]) or (call('HGET', KEYS[5], string.format('%.0f', epoch)) or '') ~= ARGV[2] then
  return { 0, epoch }
end
local published = epoch + 1
local now = server_time_ms()

-- A stored text goes into the entry as a JSON string: one written around the API may not be JSON.
local function json_text(text)
  if not text or text == '' then
    return 'null'
  end
  return cjson.encode(text)
end

-- Strings only: the options stay text, decoded by no one here.
local pairs_given = cjson.decode(ARGV[7])
local changes = {}
for i = 1, #pairs_given, 2 do
  local name, options = pairs_given[i], pairs_given[i + 1]
  local previous = call('HGET', KEYS[2], name)
  if options == '' then
    call('HDEL', KEYS[2], name)
  else
    call('HSET', KEYS[2], name, options)
  end
  call('ZADD', KEYS[3], published, name)
  changes[#changes + 1] = '{"rule":' .. cjson.encode(name) .. ',"options":' .. json_text(options)
    .. ',"previous":' .. json_text(previous) .. '}'
end

local number = string.format('%.0f', published)
local keep = tonumber(ARGV[5])
call('SET', KEYS[1], number)
call('HSET', KEYS[5], number, ARGV[3])
if published > keep then
  call('HDEL', KEYS[5], string.format('%.0f', published - keep))
end
call('LPUSH', KEYS[4], '{"epoch":' .. number .. ',"publishedAtMs":' .. string.format('%.0f', now) .. ARGV[6]
  .. ',"changes":[' .. table.concat(changes, ',') .. ']}')
call('LTRIM', KEYS[4], 0, keep - 1)
call('PUBLISH', ARGV[4], number .. ' ' .. ARGV[3])
return { 1, published }
