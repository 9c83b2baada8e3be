-- Reads what changed in the live rules since the epoch a process holds, in one atomic step, so
-- that the rules it gets are all of one epoch (packages/core/src/live-rules/).
--
-- KEYS     [1] epoch, [2] rules (hash), [3] changed (sorted set), as publish_rules.lua writes them
-- ARGV     [1] the epoch the reader holds
-- Reply    { epoch, whole, then per rule changed since: name, options JSON or nil (dropped), the
--          epoch that changed it }. whole is 1 when the reply lists every rule ever changed: the
--          reader held epoch 0, or one past Redis's (the rules were lost or replaced), and it
--          must then drop any override the reply does not name.

local call = redis.call
local epoch = tonumber(call('GET', KEYS[1]) or '0')
local since = tonumber(ARGV[1])
local whole = 0
if since == 0 or since > epoch then
  since, whole = 0, 1
end
local reply = { epoch, whole }
if since < epoch or whole == 1 then
  local changed = call('ZRANGEBYSCORE', KEYS[3], '(' .. string.format('%.0f', since), '+inf', 'WITHSCORES')
  for i = 1, #changed, 2 do
    reply[#reply + 1] = changed[i]
    -- false, not nil: a nil would end the reply here.
    reply[#reply + 1] = call('HGET', KEYS[2], changed[i])
    reply[#reply + 1] = tonumber(changed[i + 1])
  end
end
return reply
