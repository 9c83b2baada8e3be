-- Adds what processes deciding in their own memory (HybridStore) admitted since they last
-- synced to the keys the decide script keeps, and answers each key's value after, so that the
-- process can carry on from the fleet's totals. Every key is written as decide.lua
-- would write it, so a RedisStore on the same keys sees the units, and this sees its charges.
--
-- A sync carries up to a million keys a second, so what a key costs here and in the process is
-- what a sync costs: the keys are read with one MGET, their entries come as one JSON array that
-- cjson reads in C (rather than a find and a sub per number in Lua), their values go back as one
-- text, and a rule's text comes once for all its keys.
--
-- KEYS     [the instances key, when ARGV[2] is not ''], [the push's operation key, when ARGV[3]
--          is not ''], then one state key per entry; a fixed-window entry's side key is its key
--          with ':prev' appended, which shares its hash tag and so its Cluster slot
-- ARGV     [1] now: ms, or '-' for the server's TIME
--          [2] 'instance ttl_ms': this process is alive (a sorted set of instances, members
--              older than ttl_ms dropped), or ''
--          [3] '1' when the call carries an operation's key: a call that finds it set (sent
--              again after a lost reply) pushes nothing and only reads (lib/operation.lua)
--          [4] a JSON array of items: a string is a rule's text, 'code limit period limit period
--              …', which the entries after it follow; a number n starts an entry, one per state
--              key in order, and the n numbers after it are its units pushed, 'at, units, at,
--              units, …', segments in time order, units negative for a refund (0: it only reads).
--              A bucket's entry may instead hold its units folded, its count then -n: 'first,
--              last, units, floor, shift, …' (lib/bucket.lua)
-- Reply    server time in ms, the number of live instances (-1 without a heartbeat), then the
--          entries' values after, each ended by '\n': the value ('' for no key), or '!' and why the
--          entry failed; then, for each entry that pushed units above a limit, its number (from
--          1) and those units

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

local KEYS, ARGV, type, pcall = KEYS, ARGV, type, pcall
local server_now, now = call_time(ARGV[1])

local reply, first = { server_now, -1 }, 1
if ARGV[2] ~= '' then
  reply[2] = heartbeat(KEYS[1], ARGV[2], now)
  first = 2
end
local operation, ran_before = nil, false
if ARGV[3] ~= '' then
  operation, first = KEYS[first], first + 1
  ran_before = operation_ran(operation)
end

-- Keys of one rule send the same rule text, which is parsed once per call.
local rule_of = rule_reader({ fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module })

-- MGET answers nil for a key of another type as for none: write_counter's `absent` tells them apart.
local values = {}
if first <= #KEYS then
  values = call('MGET', unpack(KEYS, first, #KEYS))
end
local s, segments, over, afters = {}, {}, {}, {}
local items = cjson.decode(ARGV[4])
local rule, entry, j, size, held = nil, 0, 1, #items, 0
while j <= size do
  local item = items[j]
  if type(item) == 'string' then
    rule = rule_of(item)
    j = j + 1
  else
    if type(item) ~= 'number' or item % 1 ~= 0 or j + math.abs(item) > size then
      error('the sync entry at item ' .. j .. ' does not hold its count of numbers: ' .. tostring(item))
    end
    entry = entry + 1
    local name, raw = KEYS[first + entry - 1], values[entry]
    local folded, count = item < 0, math.abs(item)
    -- The entry's numbers, copied into the one table every module reads segments from.
    local copied = ran_before and 0 or count
    for x = 1, copied do
      segments[x] = items[j + x]
    end
    for x = copied + 1, held do
      segments[x] = nil
    end
    held = copied
    j = j + count + 1
    local after, pushed_over = nil, 0
    if not name then
      after = '!an entry with no key'
    elseif not rule then
      after = '!no rule text before the entry'
    elseif folded and rule.code ~= 'tb' then
      after = '!units folded for a rule that is not a bucket'
    else
      -- A key or side key of another type fails its entry alone: it is read before anything is written.
      -- Most keys push one segment to a rule of one window, which a counter may add in place.
      local module, windows = rule.module, rule.windows
      local ok, added_over, added_after = true, 0, nil
      if copied == 2 and windows[2] == nil and module.sync_in_window then
        ok, added_over, added_after = pcall(module.sync_in_window, name, raw, windows[1], now, segments[1], segments[2])
      end
      if ok and not added_after then
        ok, added_over, added_after = pcall(module.sync, name, raw, windows, now, segments, s, folded, not raw)
      end
      if ok then
        pushed_over, after = added_over, added_after
      else
        -- A value never holds a line break; an error's text might.
        after = '!' .. string.gsub(tostring(type(added_over) == 'table' and added_over.err or added_over), '\n', ' ')
      end
    end
    afters[entry] = after
    if pushed_over > 0 then
      over[#over + 1] = entry
      over[#over + 1] = pushed_over
    end
  end
end
afters[entry + 1] = ''
reply[3] = table.concat(afters, '\n')
for j = 1, #over do
  reply[3 + j] = over[j]
end
if operation and not ran_before then
  operation_done(operation)
end
return reply
