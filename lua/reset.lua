-- Forgets the state of some keys, exactly once per operation: a reset sent again after a lost reply
-- must not delete what was charged after it ran.
--
-- KEYS   the operation's key, then the keys to delete, all in one Cluster slot
-- ARGV   none
-- Reply  1 when it deleted them now, 0 when the operation had already run

--#include lib/operation.lua

local KEYS = KEYS
if operation_ran(KEYS[1]) then
  return 0
end
for i = 2, #KEYS do
  redis.call('UNLINK', KEYS[i])
end
operation_done(KEYS[1])
return 1
