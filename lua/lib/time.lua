-- The time a script works at: the Redis server's, or one a process sent. Standalone (redis.call,
-- not numbers.lua's locals): every script reads it, at most once per call.

-- The server's time in whole milliseconds.
local function server_time_ms()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- A time a process sent as text, if it is whole milliseconds from 0 to 8.64e15 (clock.ts); nil
-- otherwise: any other time would admit or refuse everything and corrupt every window it touched.
local function sent_time(text)
  local now = tonumber(text)
  if now and now == math.floor(now) and now >= 0 and now <= 8640000000000000 then
    return now
  end
  return nil
end

-- The error for a time sent_time refused.
local function bad_time(text)
  error('the clock sent ' .. tostring(text) .. ' as the time; a time is whole milliseconds from 0 to 8640000000000000')
end
