-- Adds what processes deciding in their own memory (HybridStore) admitted since they last
-- synced to the keys the decide script keeps, and answers each key's value after, so that the
-- process can carry on from the fleet's totals. Every key is written as decide.lua
-- would write it, so a RedisStore on the same keys sees the units, and this sees its charges.
--
-- KEYS     [the instances key, when ARGV[2] is not ''], [the push's operation key, when ARGV[3]
--          is not ''], then one state key per entry; a fixed-window entry's side key is its key
--          with ':prev' appended, which shares its hash tag and so its Cluster slot
-- ARGV     [1] now: ms, or '-' for the server's TIME
--          [2] 'instance ttl_ms': this process is alive (a sorted set of instances, members
--              older than ttl_ms dropped), or ''
--          [3] '1' when the call carries an operation's key: a call that finds it set (sent
--              again after a lost reply) pushes nothing and only reads (lib/operation.lua)
--          then one entry per key: 'code limit period limit period …|at units at units …',
--          segments in time order, units negative for a refund; no segment: only read. A bucket's
--          entry may instead hold its units folded, '~first last units floor shift …'
--          (lib/bucket.lua)
-- Reply    server time in ms, the number of live instances (-1 without a heartbeat), then per
--          entry: the value after ('' for no key), or '!' and why the entry failed, and the
--          units pushed above a limit

--#include lib/numbers.lua
--#include lib/expire.lua
--#include lib/counter_state.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua
--#include lib/time.lua
--#include lib/rule_text.lua
--#include lib/sync_call.lua
--#include lib/operation.lua

local KEYS, ARGV = KEYS, ARGV
local server_now, now = call_time(ARGV[1])

local reply, key = { server_now, -1 }, 1
if ARGV[2] ~= '' then
  reply[2] = heartbeat(KEYS[1], ARGV[2], now)
  key = 2
end
local operation, ran_before = nil, false
if ARGV[3] ~= '' then
  operation, key = KEYS[key], key + 1
  ran_before = operation_ran(operation)
end

-- Keys of one rule send the same rule text, which is parsed once per call.
local rule_of = rule_reader({ fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module })

local s, segments = {}, {}
for arg = 4, #ARGV do
  local text, pushed = string.match(ARGV[arg], '^([^|]*)|(.*)$')
  if ran_before then
    pushed = ''
  end
  local rule = rule_of(text)
  local folded = string.sub(pushed, 1, 1) == '~'
  if folded then
    pushed = string.sub(pushed, 2)
  end
  read_segments(pushed, segments)
  local name = KEYS[key]
  local raw, after, over = redis.pcall('GET', name), nil, 0
  if type(raw) == 'table' then
    -- A key of another type (WRONGTYPE) fails its entry alone: '!' and what Redis said.
    after = '!' .. tostring(raw.err)
  elseif folded and rule.code ~= 'tb' then
    after = '!units folded for the rule ' .. text .. ', which is not a bucket'
  else
    -- A side key of another type fails its entry alone too: it is read before anything is written.
    local ok, added_over, added_after = pcall(add_to_key, rule, name, raw, now, segments, s, folded)
    if ok then
      over, after = added_over, added_after
    else
      after = '!' .. tostring(type(added_over) == 'table' and added_over.err or added_over)
    end
  end
  reply[#reply + 1], reply[#reply + 2] = after, over
  key = key + 1
end
if operation and not ran_before then
  operation_done(operation)
end
return reply
