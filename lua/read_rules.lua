-- Reads what changed in the live rules since the epoch a process holds, in one atomic step, so
-- that the rules it gets are all of one epoch (packages/core/src/live-rules/).
--
-- KEYS     [1] epoch, [2] rules (hash), [3] changed (sorted set), [4] ids (hash), as
--          publish_rules.lua writes them
-- ARGV     [1] the epoch the reader holds
--          [2] the id of the publish that made it, as the reader read it ('' for none recorded)
--          [3] how many epochs the ids hash keeps
-- Reply    { epoch, the id of the publish that made it ('' for none recorded), whole, then per
--          rule changed since: name, options JSON or nil (dropped), the epoch that changed it }.
--          whole is 0 when the reply lists the rules changed since ARGV[1]; otherwise it lists
--          every rule ever changed, and the reader must drop any override the reply does not
--          name: 1 when the reader held epoch 0, or one too old for its id to be kept; 2 when
--          Redis does not hold the publish the reader holds (an epoch past Redis's, or one
--          another publish made: the reader's was lost, in a failover before it replicated, say).

local call = redis.call
local epoch = tonumber(call('GET', KEYS[1]) or '0')
local id = call('HGET', KEYS[4], string.format('%.0f', epoch)) or ''
local since = tonumber(ARGV[1])
local whole = 0
if since == 0 then
  whole = 1
elseif since > epoch then
  whole = 2
elseif since <= epoch - tonumber(ARGV[3]) then
  whole = 1
elseif (call('HGET', KEYS[4], string.format('%.0f', since)) or '') ~= ARGV[2] then
  whole = 2
end
local reply = { epoch, id, whole }
if since < epoch or whole ~= 0 then
  if whole ~= 0 then
    since = 0
  end
  local changed = call('ZRANGEBYSCORE', KEYS[3], '(' .. string.format('%.0f', since), '+inf', 'WITHSCORES')
  for i = 1, #changed, 2 do
    reply[#reply + 1] = changed[i]
    -- false, not nil: a nil would end the reply here.
    reply[#reply + 1] = call('HGET', KEYS[2], changed[i])
    reply[#reply + 1] = tonumber(changed[i + 1])
  end
end
return reply
