-- Adds what processes deciding in their own memory (HybridStore) admitted since they last
-- synced to the keys the decide script keeps, and answers each key's value after, so that the
-- process can carry on from the fleet's totals. Every key is written as decide.lua
-- would write it, so a RedisStore on the same keys sees the units, and this sees its charges.
--
-- A sync carries up to a million keys a second, so what a key costs here and in the process is
-- what a sync costs: most keys take one DECRBY (a fixed window's addable value, lib/counter_state.lua),
-- the rest are read with one MGET, their entries come as one JSON array that cjson reads in C
-- (rather than a find and a sub per number in Lua), their values go back as one text, and a
-- rule's text comes once for all its keys.
--
-- KEYS     [the instances key, when ARGV[2] is not ''], [the push's operation key, when ARGV[3]
--          is not ''], then the state keys of the entries, one per entry, those of one Cluster
--          slot; a fixed-window entry's side key is its key with ':prev' appended, which shares
--          its hash tag and so its Cluster slot
-- ARGV     [1] now: ms, or '-' for the server's TIME
--          [2] 'instance ttl_ms': this process is alive (a sorted set of instances, members
--              older than ttl_ms dropped), or ''
--          [3] '1' when the call carries an operation's key: a call that finds it set (sent
--              again after a lost reply) pushes nothing, answers '?' again for the entries it
--              did not push, and reads the others (lib/operation.lua)
--          [4] a JSON array of items: a string is a rule's text, 'code limit period limit period
--              …', which the entries after it follow; a number n starts an entry, one per state
--              key in order, and the n numbers after it are its units pushed, 'at, units, at,
--              units, …', segments in time order, units negative for a refund (0: it only reads).
--              A bucket's entry may instead hold its units folded, its count then -n: 'first,
--              last, units, floor, shift, …' (lib/bucket.lua)
--          [5] '' (or none) when the state keys are all in KEYS; else, on a Cluster, how many keys each slot
--              of the call holds, 'n,n,…', its keys in slot order: the first slot's in KEYS, the
--              others' from ARGV[6] on. A call then covers every slot of a master it was sent to,
--              rather than one (a slot holds about 60 keys of a million): each slot's keys are
--              read with a command of their own, since a command may not cross slots.
-- Reply    server time in ms, the number of live instances (-1 without a heartbeat), then the
--          entries' values after, each ended by '\n': the value ('' for no key); '!' and why the
--          entry failed; '?' for a key this node does not serve, its units not pushed; or, sent
--          again after a lost reply, '~' for a key whose units the call pushed when it ran and
--          that this node no longer serves. Then, for each entry that pushed units above a limit,
--          its number (from 1) and those units

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
-- Entries a call did not push, as its operation's key notes them: sent again, it answers them
-- the same, since their units are still to be pushed wherever their keys went.
local operation, ran_before, unpushed = nil, false, {}
if ARGV[3] ~= '' then
  operation, first = KEYS[first], first + 1
  local note = operation_note(operation)
  ran_before = note ~= false
  for number in string.gmatch(note or '', ' (%d+)') do
    unpushed[tonumber(number)] = true
  end
end

-- Keys of one rule send the same rule text, which is parsed once per call.
local rule_of = rule_reader({ fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module })

-- The state keys, entry n's at names[offset + n]: KEYS's own, or, when the call covers several
-- slots, a list of those in KEYS and those after ARGV[5].
local names, offset = KEYS, first - 1
if #ARGV > 5 then
  names, offset = {}, 0
  for i = first, #KEYS do
    names[#names + 1] = KEYS[i]
  end
  for i = 6, #ARGV do
    names[#names + 1] = ARGV[i]
  end
end
-- Each slot's last key. Nothing is checked before the keys are written: on a Cluster, a key this
-- node does not serve (its slot is another's, as the client's map is out of date, or the key
-- moved out of a slot being migrated) fails the first command on it, and each entry reads all
-- its keys before it writes any, so such a key's entry writes nothing and answers '?'; the
-- client sends its units again slot by slot, which follows Redis's redirections. A check of each
-- slot's keys up front cost about a command per key, as a call of a million keys' sync covers
-- about as many slots as keys.
local runs = ARGV[5] or ''
local bounds = {}
if runs ~= '' then
  local at = 1
  for run in string.gmatch(runs, '%d+') do
    local last = at + tonumber(run) - 1
    bounds[#bounds + 1] = last
    at = last + 1
  end
else
  bounds[1] = #names
end
-- Raised for a key whose slot's MGET met a key this node does not serve. A command refused as the
-- Cluster is down wrote nothing either: its key's units go again too, rather than being dropped.
local ELSEWHERE = {}
local function elsewhere(failure)
  if failure == ELSEWHERE then
    return true
  end
  local text = failure_text(failure)
  return find(text, 'non local key', 1, true) ~= nil or find(text, 'cluster is down', 1, true) ~= nil
end
-- The keys' values, read with one MGET per slot when an entry first needs one: most keys of a
-- sync never do (fixed_window.lua adds to them without a read). A key's value is read before the
-- key is written, as only its own entry writes it. MGET answers nil for a key of another type as
-- for none: write_counter's `absent` tells them apart. A slot whose MGET fails as not this
-- node's holds ELSEWHERE for each of its keys, and an entry reading one fails before it writes.
local values
local function value_of(n)
  if not values then
    -- Kept once whole: a read that fails part way is read again by the next entry.
    local read_values = {}
    local at = offset + 1
    for b = 1, #bounds do
      local last = bounds[b]
      if at <= last then
        local read = redis.pcall('MGET', unpack(names, at, last))
        if read.err then
          if not elsewhere(read) then
            error(read)
          end
          for i = at, last do
            read_values[i - offset] = ELSEWHERE
          end
        else
          for i = 1, #read do
            read_values[at - offset + i - 1] = read[i]
          end
        end
      end
      at = last + 1
    end
    values = read_values
  end
  local value = values[n]
  if value == ELSEWHERE then
    error(ELSEWHERE)
  end
  return value
end
local s, segments, over, afters, skipped = {}, {}, {}, {}, {}
local items = cjson.decode(ARGV[4])
local rule, entry, j, size, held = nil, 0, 1, #items, 0
-- Set while a key's module runs: a failure then is the key's alone (a key or side key of
-- another type, read before anything of it is written), and the entries after it go on.
local keyed = false

-- The entries from item j on. One protected call for them all rather than one per key, each of
-- which is a C call and a frame of its own (bench/README.md); after a key's failure the next
-- call resumes.
local function sync_from()
  while j <= size do
    local item = items[j]
    local kind = type(item)
    if kind == 'string' then
      rule = rule_of(item)
      j = j + 1
    else
      local folded = kind == 'number' and item < 0
      local count = folded and -item or item
      if kind ~= 'number' or item % 1 ~= 0 or j + count > size then
        error('the sync entry at item ' .. j .. ' does not hold its count of numbers: ' .. tostring(item))
      end
      entry = entry + 1
      local name, at = names[offset + entry], j
      j = j + count + 1
      local after, pushed_over = nil, 0
      if not name then
        after = '!an entry with no key'
      elseif not rule then
        after = '!no rule text before the entry'
      elseif folded and rule.code ~= 'tb' then
        after = '!units folded for a rule that is not a bucket'
      elseif unpushed[entry] then
        after = '?'
      else
        local module, windows = rule.module, rule.windows
        keyed = true
        -- Most keys push one segment to a rule of one window, which a counter may add in place,
        -- with the adder its module makes once for the rule (false: it has none).
        if count == 2 and not ran_before then
          local add = rule.adder
          if add == nil then
            add = windows[2] == nil and module.adder and module.adder(windows[1], now, value_of) or false
            rule.adder = add
          end
          if add then
            local added_over, added_after = add(name, entry, items[at + 1], items[at + 2])
            if added_after then
              pushed_over, after = added_over, added_after
            end
          end
        end
        if not after then
          -- The entry's numbers, copied into the one table every module reads segments from.
          local copied = ran_before and 0 or count
          for x = 1, copied do
            segments[x] = items[at + x]
          end
          for x = copied + 1, held do
            segments[x] = nil
          end
          held = copied
          local raw = value_of(entry)
          pushed_over, after = module.sync(name, raw, windows, now, segments, s, folded, not raw)
        end
        keyed = false
      end
      afters[entry] = after
      if pushed_over > 0 then
        over[#over + 1] = entry
        over[#over + 1] = pushed_over
      end
    end
  end
end

while true do
  local ok, failure = pcall(sync_from)
  if ok then
    break
  end
  if not keyed then
    error(failure, 0)
  end
  keyed = false
  if not elsewhere(failure) then
    -- A value never holds a line break; an error's text might.
    afters[entry] = '!' .. string.gsub(failure_text(failure), '\n', ' ')
  elseif ran_before then
    afters[entry] = '~'
  else
    afters[entry] = '?'
    skipped[#skipped + 1] = entry
  end
end
afters[entry + 1] = ''
reply[3] = table.concat(afters, '\n')
for j = 1, #over do
  reply[3 + j] = over[j]
end
if operation and not ran_before then
  operation_done(operation, #skipped > 0 and 'unpushed ' .. table.concat(skipped, ' ') or nil)
end
return reply
