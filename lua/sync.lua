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
--              again after a lost reply) pushes nothing and only reads (lib/operation.lua)
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
--              checked and read with commands of their own, since a command may not cross slots.
-- Reply    an error 'TG_NONLOCAL <ran before: 0 or 1>' when a slot of the call is not this node's
--          (the client's map of the Cluster is out of date): the slots are all checked before any
--          key is written, so the call wrote nothing. Otherwise server time in ms, the number of live instances (-1 without a heartbeat), then the
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
-- On a Cluster, a call covering several slots first asks whether each is this node's, before
-- anything is written: a slot it does not serve fails EXISTS of the slot's keys, and the client
-- sends the keys again slot by slot, which follows Redis's redirections. All of the slot's keys,
-- not one: in a slot being migrated, a key already moved fails the check too, where with one key
-- checked the call would go on and that key would fail alone, its units dropped.
local runs = ARGV[5] or ''
local bounds = {}
if runs ~= '' then
  local at = 1
  for run in string.gmatch(runs, '%d+') do
    local last = at + tonumber(run) - 1
    if type(redis.pcall('EXISTS', unpack(names, at, last))) == 'table' then
      return redis.error_reply('TG_NONLOCAL ' .. (ran_before and '1' or '0'))
    end
    bounds[#bounds + 1] = last
    at = last + 1
  end
else
  bounds[1] = #names
end
-- The keys' values, read with one MGET per slot when an entry first needs one: most keys of a
-- sync never do (fixed_window.lua adds to them without a read). A key's value is read before the
-- key is written, as only its own entry writes it. MGET answers nil for a key of another type as
-- for none: write_counter's `absent` tells them apart.
local values
local function value_of(n)
  if not values then
    values = {}
    local at = offset + 1
    for b = 1, #bounds do
      local last = bounds[b]
      if at <= last then
        local read = call('MGET', unpack(names, at, last))
        for i = 1, #read do
          values[at - offset + i - 1] = read[i]
        end
      end
      at = last + 1
    end
  end
  return values[n]
end
local s, segments, over, afters = {}, {}, {}, {}
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
  -- A value never holds a line break; an error's text might.
  afters[entry] = '!' .. string.gsub(tostring(type(failure) == 'table' and failure.err or failure), '\n', ' ')
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
