-- Forgets the state of some keys, exactly once per operation: a reset sent again after a lost reply
-- must not delete what was charged after it ran. Beside each state key it leaves when it forgot
-- it, so that a strict HybridStore's slice reserved before never comes back as capacity: its
-- give-back finds the mark and gives nothing (lease.lua).
--
-- KEYS   the operation's key, then the keys to delete, all in one Cluster slot
-- ARGV   [1] now: ms, or '-' for the server's TIME
--        [2] how long the marks live, ms: longer than a slice reserved before can be given back
-- Reply  1 when it deleted them now, 0 when the operation had already run

--#include lib/time.lua
--#include lib/operation.lua

local KEYS, ARGV = KEYS, ARGV
if operation_ran(KEYS[1]) then
  return 0
end
local now = ARGV[1] == '-' and server_time_ms() or sent_time(ARGV[1]) or bad_time(ARGV[1])
local marks_live = tonumber(ARGV[2])
for i = 2, #KEYS do
  local key = KEYS[i]
  redis.call('UNLINK', key)
  -- A fixed window's side key (':prev') and a block's (':block') go with their key, which
  -- carries the mark.
  local side = string.sub(key, -5) == ':prev' or string.sub(key, -6) == ':block'
  if not side then
    redis.call('SET', key .. ':reset', now, 'PX', marks_live)
  end
end
operation_done(KEYS[1])
return 1
