-- Strict mode of processes deciding in their own memory (HybridStore, consistency 'strict'):
-- each holds slices of the limits, units charged here in advance that only it may admit, so
-- that no window ever counts fewer units than the fleet admitted in it. This script gives unused
-- units back, reserves new ones, and decides a request whose slices ran short, as decide.lua
-- would, atomically. Keys are written as decide.lua writes them: a RedisStore on the same keys
-- counts every reserved unit as used.
--
-- KEYS     [the instances key, when ARGV[3] is not ''], [the call's operation key, when ARGV[4]
--          is not ''], then one state key per entry; a fixed-window entry's side key is its key
--          with ':prev' appended (sync.lua)
-- ARGV     [1] now: ms, or '-' for the server's TIME
--          [2] 'decide' for a decision, '-' for none
--          [3] 'instance ttl_ms', the heartbeat (sync.lua), or ''
--          [4] '1' when the call carries an operation's key: the reply is kept with it, and the
--              call sent again (after a lost reply) answers that reply and does nothing else
--              (lib/operation.lua)
--          [5] the process's instance id: what it holds of each key is recorded under it
--          then one entry per key: 'code limit period limit period …|want|need|at units …': the
--          units to reserve, the units the decision needs beyond what the process's slice of
--          the key covers (0 without a decision), then the units given back, each negative and
--          stamped with the time they were reserved at, so that they leave the window they were
--          charged to
-- Per entry, the units given back (a slice's unused units, refunds) come off first, as far as the
-- key records the process charging them: `<key>:held`, a hash of units charged by instance,
-- written with every charge in the same script, so that a failover that lost a charge lost its
-- record too, and giving back what the window never held takes nothing from the charges it holds. Then, with a decision: every entry is checked
-- for its `need` (consume); if all fit, each is charged its need and the `want` units every one
-- of its windows still has room for; if any does not, nothing is charged, and nothing reserved.
-- A key's count holds the process's slice, so this is the answer a RedisStore gives to the whole
-- cost on the count without it. Without a decision: each entry reserves what fits of `want`.
-- Reply    server time in ms, live instances (-1 without a heartbeat), allowed (1 or 0; -1
--          without a decision), then per entry: the units reserved, the key's value after ('' for
--          none), and with a decision each window's remaining, reset_at and fits_at as decide.lua
--          answers them for a charge of need plus the units reserved. An entry whose key Redis
--          cannot read (another type) answers 0 and '!' and what Redis said, without a decision;
--          with one, it fails the call.

--#include lib/numbers.lua
--#include lib/expire.lua
--#include lib/counter_state.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/time.lua
--#include lib/rule_text.lua
--#include lib/sync_call.lua
--#include lib/operation.lua

local KEYS, ARGV = KEYS, ARGV
local operation = nil
if ARGV[4] ~= '' then
  operation = KEYS[ARGV[3] ~= '' and 2 or 1]
  local kept = operation_reply(operation)
  if kept then
    return kept
  end
end
local server_now, now = call_time(ARGV[1])
local decides = ARGV[2] == 'decide'

local reply, key = { server_now, -1, -1 }, 1
if ARGV[3] ~= '' then
  reply[2] = heartbeat(KEYS[1], ARGV[3], now)
  key = 2
end
if operation then
  key = key + 1
end

local scratch, segments = {}, {}
local instance = ARGV[5]

-- The segments 'at units at units …' of `text` read into `segments`, whose old cells beyond are
-- cleared; returns how many numbers it holds. Plain finds: gmatch would build an iterator and a
-- capture per number.
local function read_segments(text, segments)
  local count, position, to = 0, 1, #text
  while position <= to do
    local stop = find(text, ' ', position, true) or to + 1
    count = count + 1
    segments[count] = tonumber(sub(text, position, stop - 1))
    position = stop + 1
  end
  for j = count + 1, #segments do
    segments[j] = nil
  end
  return count
end

-- Keeps the segments for which keep(at, units) is true, in order; answers how many numbers are left.
local function keep_segments(keep)
  local kept = 0
  for j = 1, #segments, 2 do
    if keep(segments[j], segments[j + 1]) then
      segments[kept + 1], segments[kept + 2] = segments[j], segments[j + 1]
      kept = kept + 2
    end
  end
  for j = kept + 1, #segments do
    segments[j] = nil
  end
  return kept
end

-- The units in `segments` given back to the key `name`, as sync.lua adds a process's units; those
-- reserved no later than the key was last reset (reset.lua's mark) give nothing back: the reset
-- forgot them, and the count that holds them now is other charges'.
local function give_back(name, rule)
  local reset_at = tonumber(call('GET', name .. ':reset'))
  if reset_at and keep_segments(function(at)
    return at > reset_at
  end) == 0 then
    return
  end
  -- Only what the key records this process charging comes back, the latest give-backs first.
  local held_key = name .. ':held'
  local held = tonumber(call('HGET', held_key, instance)) or 0
  local left = held
  for j = #segments - 1, 1, -2 do
    local units = min(-segments[j + 1], left)
    left = left - units
    segments[j + 1] = -units
  end
  if held - left > 0 then
    if left > 0 then
      call('HSET', held_key, instance, left)
    else
      call('HDEL', held_key, instance)
    end
  end
  if keep_segments(function(_, units)
    return units < 0
  end) > 0 then
    rule.module.sync(name, call('GET', name), rule.windows, now, segments, scratch)
  end
end

-- Records units this process charged on `name`, for as long as the key lives.
local function hold(name, units, windows)
  local held_key = name .. ':held'
  call('HINCRBY', held_key, instance, units)
  local ttl = call('PTTL', name)
  if ttl <= 0 then
    ttl = 0
    for k = 1, #windows do
      ttl = max(ttl, 2 * windows[k].period)
    end
  end
  local kept = call('PTTL', held_key)
  if kept < ttl then
    expire_in(held_key, ttl)
  end
end

local rule_of = rule_reader({ fw = fixed_window_module, sw = sliding_window_module })
local entries = {}
for arg = 6, #ARGV do
  local text, want, need, given = string.match(ARGV[arg], '^([^|]*)|(%d+)|(%d+)|(.*)$')
  local rule = rule_of(text)
  entries[#entries + 1] = { rule = rule, want = tonumber(want), need = tonumber(need), name = KEYS[key] }
  key = key + 1
  if read_segments(given, segments) > 0 then
    local entry = entries[#entries]
    local ok, failure = pcall(give_back, entry.name, rule)
    if not ok then
      if decides then
        error(failure)
      end
      entry.failure = failure_text(failure)
    end
  end
end

-- Reads, and with a decision checks, every entry: state from state[base + 1] on.
local state, allowed, base = {}, true, 0
for i = 1, #entries do
  local entry = entries[i]
  local rule = entry.rule
  entry.base = base
  if entry.failure then
    -- Answered as it is below; its cells are not read.
  elseif decides then
    if not rule.module.check(entry.name, rule.windows, now, entry.need, 'consume', state, base) then
      allowed = false
    end
  else
    local ok, failure = pcall(rule.module.check, entry.name, rule.windows, now, 0, 'consume', state, base)
    if not ok then
      entry.failure = failure_text(failure)
    end
  end
  base = base + rule.module.width(#rule.windows)
end
if decides then
  reply[3] = allowed and 1 or 0
end

local n = 3
for i = 1, #entries do
  local entry = entries[i]
  local rule, at = entry.rule, entry.base
  local module, windows = rule.module, rule.windows
  if entry.failure then
    reply[n + 1], reply[n + 2] = 0, '!' .. entry.failure
    n = n + 2
  else
    local reserved, need = 0, entry.need
    if allowed then
      reserved = min(entry.want, module.room(windows, now, need, state, at))
    end
    local charge = need + reserved
    local writes = allowed and charge > 0
    local slot = n
    n = n + 2
    if decides then
      n = module.finish(entry.name, windows, now, charge, 'consume', writes, state, at, reply, n, false)
    else
      module.finish(entry.name, windows, now, charge, 'consume', writes, state, at, scratch, 0, false)
    end
    if writes then
      hold(entry.name, charge, windows)
    end
    reply[slot + 1], reply[slot + 2] = reserved, call('GET', entry.name) or ''
  end
end
if operation then
  operation_keep(operation, reply)
end
return reply
