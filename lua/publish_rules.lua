-- Publishes a change of live rules (packages/core/src/live-rules/): compare-and-set on the epoch,
-- then every rule changed, the new epoch, a history entry and a nudge, as one atomic step. Rule
-- options arrive as JSON the publisher validated; they are stored and recorded as they are, never
-- decoded here (cjson would turn a limit of 2^53 - 1 into a float).
--
-- KEYS     [1] epoch (string: the number of publishes), [2] rules (hash: rule name, options
--          JSON), [3] changed (sorted set: rule name, scored by the epoch that last changed it, a
--          dropped rule included), [4] history (list of JSON entries, newest first); all four
--          share the hash tag {rules}, and so a Cluster slot
-- ARGV     [1] the epoch the change was validated against
--          [2] the channel to nudge followers on
--          [3] how many history entries to keep
--          [4] JSON members added to the history entry ('' or ',"rollbackOf":N')
--          then pairs: rule name, options JSON ('' drops the rule's override)
-- Reply    { 1, the new epoch }, or { 0, the epoch found } when it was not ARGV[1]: nothing written

--#include lib/time.lua

local call = redis.call
local epoch = tonumber(call('GET', KEYS[1]) or '0')
if epoch ~= tonumber(ARGV[1]) then
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

local changes = {}
for i = 5, #ARGV, 2 do
  local name, options = ARGV[i], ARGV[i + 1]
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
call('SET', KEYS[1], number)
call('LPUSH', KEYS[4], '{"epoch":' .. number .. ',"publishedAtMs":' .. string.format('%.0f', now) .. ARGV[4]
  .. ',"changes":[' .. table.concat(changes, ',') .. ']}')
call('LTRIM', KEYS[4], 0, tonumber(ARGV[3]) - 1)
call('PUBLISH', ARGV[2], number)
return { 1, published }
