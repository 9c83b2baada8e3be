-- Decides a batch of decisions, each atomically: checks, and for `consume` charges, every window
-- of every target of one decision, all or nothing. If any window cannot fit `cost`, nothing of
-- that decision is written anywhere. Batching lets one EVALSHA carry every decision a process
-- made in the same turn of its event loop: one write, one script call, one TIME for all of them.
--
-- KEYS     the targets' state keys, decision after decision, each followed by its block's key
--          when its rule blocks; a target is one rule × one identifier and its key holds all the
--          rule's windows
-- ARGV     one request per decision: 'operation cost now rule|rule|…', one rule per key, or for
--          a decision that may shed 'operation cost now * rule|rule|…' and then its random number
--          as an argument of its own, or for a refund or undo sent once only
--          'operation cost now ! rule|rule|…', whose first key is then its operation's key
--            operation  'consume', 'peek', 'refund', 'charge' (charge whether it fits or not: a
--                       reservation settled above its estimate, the excess a debt), or 'undo'
--                       (take back a consume this decision charged at `now`, on the targets of
--                       one Cluster slot when another slot refused); '*' only with 'consume' or
--                       'peek'
--            cost       an integer ≥ 0
--            now        milliseconds, or '-' for the server's TIME (immune to app servers' skew)
--            rule       'code window window …' with code 'sl', 'fw', 'sw' or 'tb' and each window
--                       'limit period', or 'limit period/low_burst' for one that sheds; then, for
--                       a target whose rule blocks, '#for after factor max' (lib/lockout.lua):
--                       its block lives in the key beside its state's, '<key>:block', which
--                       follows the state key in KEYS
--            random     in [0, 1), as JavaScript prints it: a decision that fits every window is
--                       still refused, charging nothing, when it is below a window's drop
--                       probability (lib/shedding.lua)
--            '!'        the decision writes exactly once (a refund, undo or charge): its operation's key (in its
--                       targets' slot) is set once it ran, and a decision that finds it set (a
--                       client sending the command again after a lost reply) writes nothing and
--                       answers the state as it is (lib/operation.lua)
--          Requests of one rule in one batch send the same text, which is parsed once; the random
--          number, which differs every time, stays out of it.
-- Reply    one flat array, decision after decision: either now × 2 + allowed (1 or 0), then for a
--          request with a random number 1 if it was shed else 0, then for a request with a block
--          1 if a block refused it (one in force, or one its refusal started) else 0, then per
--          window in order
--          remaining, reset_at, fits_at, with fits_at = -1 when the cost can never fit (for a
--          window that shed the decision: when its use after the cost is at most low_burst, at
--          least now + 1), every number an integer; or one string, the error that decision met
--          (one bad key fails only its own decision, and it fails before anything of it is
--          written). Flat, because Redis converts a nested table per decision at a cost of its
--          own, and now shares an integer with allowed because each integer of the reply costs
--          Redis time.
--
-- Every operation of every algorithm takes the same two passes, for one window of one key as for
-- many: each module offers
--   width(windows)   the cells a target of `windows` windows takes in the decision's table
--   check(key, windows, now, cost, operation, s, base)
--                    reads the key into s from s[base + 1] on, made current at now (an undo's as
--                    stored), and says whether `cost` fits every window (refund and undo: true)
--   sheds(windows, now, cost, random, s, base)
--                    after a check that fitted, whether a window with low_burst drops the request
--   finish(key, windows, now, cost, operation, writes, s, base, reply, n, shed)
--                    when `writes`, applies the operation; writes the key if it changed or held
--                    state a faster clock stamped; appends each window's remaining, reset_at and
--                    fits_at after reply[n] (`shed`: the random number of a decision shed, whose
--                    dropping windows answer when they stop shedding); returns the reply's new
--                    length
-- Every target is checked before any is finished, so nothing is written unless every window of
-- the decision fits, and a key that cannot be read (WRONGTYPE) fails the decision before any
-- write. The steps are those of the TypeScript models that the in-memory store runs (undo has
-- no counterpart there: one process never splits a decision).

--#include lib/numbers.lua
--#include lib/expire.lua
--#include lib/shedding.lua
--#include lib/counter_state.lua
--#include lib/fixed_window.lua
--#include lib/sliding_window.lua
--#include lib/bucket.lua
--#include lib/sliding_log.lua
--#include lib/time.lua
--#include lib/rule_text.lua
--#include lib/operation.lua
--#include lib/lockout.lua

local KEYS, ARGV = KEYS, ARGV
local modules = { sl = sliding_log_module, fw = fixed_window_module, sw = sliding_window_module, tb = bucket_module }
local OPERATIONS = { consume = true, peek = true, refund = true, undo = true, charge = true }
-- Decisions of one batch mostly share their rules and requests: each text is parsed once per batch.
local read_rule = rule_reader(modules)
local parsed_requests = {}

-- The rule of `text`, with its module's steps and the cells it takes (`width`) at hand.
local function rule_of(text)
  local rule = read_rule(text)
  if not rule.width then
    local module = rule.module
    rule.check, rule.sheds, rule.finish = module.check, module.sheds, module.finish
    rule.width = module.width(#rule.windows)
  end
  return rule
end

local server_now
local function server_time()
  server_now = server_now or server_time_ms()
  return server_now
end

-- A request's `now` is its time, or nil when the text sent no usable time: its decision then
-- fails, alone, with `bad_now` as the reason.
local function request_of(text)
  local request = parsed_requests[text]
  if request then
    return request
  end
  local operation, cost, now, rest = string.match(text, '^(%a+) (%d+) (%S+) (.*)$')
  if not OPERATIONS[operation] then
    error('unknown operation in ' .. text)
  end
  -- A rule starts with its code's letters; '*' (byte 42) says a random number follows the request,
  -- '!' (byte 33) that the decision's first key is its operation's.
  local sheds = byte(rest) == 42
  if sheds then
    if operation ~= 'consume' and operation ~= 'peek' then
      error('a random number only goes with consume or peek: ' .. text)
    end
    rest = sub(rest, 3)
  end
  local once = byte(rest) == 33
  if once then
    if operation ~= 'refund' and operation ~= 'undo' and operation ~= 'charge' then
      error('an operation key only goes with refund, undo or charge: ' .. text)
    end
    rest = sub(rest, 3)
  end
  local rules, blocks = {}, nil
  for rule in string.gmatch(rest, '[^|]+') do
    local mark = find(rule, '#', 1, true)
    if mark then
      blocks = blocks or {}
      blocks[#rules + 1] = lockout_spec(sub(rule, mark + 1))
      rule = sub(rule, 1, mark - 1)
    end
    rules[#rules + 1] = rule_of(rule)
  end
  -- Where each target's state key is, from the decision's first: a block's key follows its own.
  local keys, width, args = #rules, 1, 1
  local at, key_count = {}, 0
  for i = 1, keys do
    at[i] = key_count
    key_count = key_count + ((blocks and blocks[i]) and 2 or 1)
  end
  if sheds then
    width, args = 2, 2
  end
  if blocks then
    width = width + 1
  end
  for i = 1, keys do
    width = width + 3 * #rules[i].windows
  end
  request = {
    operation = operation,
    cost = tonumber(cost),
    sheds = sheds,
    once = once,
    rules = rules,
    blocks = blocks,
    keys = keys,
    at = at,
    key_count = key_count,
    width = width,
    args = args,
  }
  if now == '-' then
    -- Requests live for one script call, and so does the server's time.
    request.now = server_time()
  else
    request.now = sent_time(now)
    if not request.now then
      request.bad_now = now
    end
  end
  parsed_requests[text] = request
  return request
end

-- Every target's cells, decision after decision: one table for the whole batch, its cells
-- indexed directly rather than a table per target per decision.
local state = {}

local reply, n, key, arg = {}, 0, 1, 1
-- The request being decided: kept outside so that its failure can be answered.
local request

-- After a refusal, as in algorithms/lockout.ts's caller: a block in force (`blocked`) marks its
-- window's fits_at with its end; otherwise each target with a block whose windows refused counts
-- the refusal, and one that reaches `after` starts a block. Whether a block refused the decision.
-- `locks` holds each target's block state read before, and at -i where its windows start in the reply.
local function settle_lockouts(request, locks, first, now, blocked)
  local rules, blocks, refused_by_block = request.rules, request.blocks, blocked
  for i = 1, request.keys do
    local block = blocks[i]
    if block then
      local windows, start, state = rules[i].windows, locks[-i], locks[i]
      local count = #windows
      local block_until, window = lockout_until(state, now), state and state.window or 0
      if block_until == 0 and not blocked then
        local failed = -1
        for k = 1, count do
          local fits_at = reply[start + 3 * k]
          if fits_at < 0 or fits_at > now then
            failed = k - 1
            break
          end
        end
        if failed >= 0 then
          local next_state = lockout_after_refusal(state, block, windows, now, failed)
          lockout_write(KEYS[first + request.at[i] + 1], next_state, windows, now)
          block_until, window = lockout_until(next_state, now), failed
          if block_until > 0 then
            refused_by_block = true
          end
        end
      end
      if block_until > 0 then
        local at = start + 3 * min(window, count - 1) + 3
        local fits_at = reply[at]
        if fits_at >= 0 and fits_at < block_until then
          reply[at] = block_until
        end
      end
    end
  end
  return refused_by_block
end

-- Decides ARGV[arg] onwards, each decision in the two passes above, its keys from KEYS[key] on
-- and its reply after reply[n]; or raises from the decision that failed, with n, key and arg
-- still at its start, for the loop below to answer it and resume after it: one pcall for the
-- batch. The loop's body is the decision rather than a call, which would cost every decision
-- one more.
local function decide_from_arg()
  local count = #ARGV
  while arg <= count do
    request = nil
    request = request_of(ARGV[arg])
    local operation, cost, rules, keys, now = request.operation, request.cost, request.rules, request.keys, request.now
    local at = request.at
    if not now then
      bad_time(request.bad_now)
    end
    -- A charge is a consume whose fit is not asked: its steps are a consume's.
    local forced = operation == 'charge'
    if forced then
      operation = 'consume'
    end
    -- The operation's key comes first; the targets' keys from `first` on.
    local first, ran_before = key, false
    if request.once then
      first = key + 1
      ran_before = operation_ran(KEYS[key])
    end
    local allowed, base = true, 0
    for i = 1, keys do
      local rule = rules[i]
      if not rule.check(KEYS[first + at[i]], rule.windows, now, cost, operation, state, base) and not forced then
        allowed = false
      end
      base = base + rule.width
    end
    -- A block in force refuses the decision, whatever its windows hold.
    local blocks, locks, blocked = request.blocks, nil, false
    if blocks and not forced and (operation == 'consume' or operation == 'peek') then
      locks = {}
      for i = 1, keys do
        if blocks[i] then
          locks[i] = lockout_read(KEYS[first + at[i] + 1])
          if lockout_until(locks[i], now) > 0 then
            blocked = true
          end
        end
      end
      if blocked then
        allowed = false
      end
    end
    local random, shed = false, false
    if request.sheds then
      random = tonumber(ARGV[arg + 1])
      if not (random and random >= 0 and random < 1) then
        error('the random number ' .. tostring(ARGV[arg + 1]) .. ' is not in [0, 1)')
      end
    end
    -- Only a decision that fits may be shed: one that does not is limited, whatever the draw.
    if random and allowed then
      base = 0
      for i = 1, keys do
        local rule = rules[i]
        if rule.sheds(rule.windows, now, cost, random, state, base) then
          shed = random
          allowed = false
          break
        end
        base = base + rule.width
      end
    end
    local writes = cost > 0 and operation ~= 'peek' and allowed and not ran_before
    local length = n + 1
    reply[length] = now * 2 + (allowed and 1 or 0)
    if random then
      length = length + 1
      reply[length] = shed and 1 or 0
    end
    local blocked_at
    if blocks then
      length = length + 1
      blocked_at = length
      reply[length] = 0
    end
    base = 0
    for i = 1, keys do
      local rule = rules[i]
      if locks then
        -- Where the target's windows start in the reply: a block marks one of them.
        locks[-i] = length
      end
      length = rule.finish(KEYS[first + at[i]], rule.windows, now, cost, operation, writes, state, base, reply, length, shed)
      base = base + rule.width
    end
    if locks and not allowed and not shed and (blocked or operation == 'consume') then
      if settle_lockouts(request, locks, first, now, blocked) then
        reply[blocked_at] = 1
      end
    end
    -- Set once it ran: a decision that failed on a key wrote nothing, and may be sent again.
    if request.once and not ran_before then
      operation_done(KEYS[key])
    end
    n, key, arg = length, first + request.key_count, arg + request.args
  end
end

while true do
  local ok, failure = pcall(decide_from_arg)
  if ok then
    break
  end
  -- A malformed argument fails the whole call: where its decision's keys end is unknown.
  if not request then
    error(failure)
  end
  -- Redis raises its command errors as { err = message }; ours are plain strings.
  if type(failure) == 'table' and failure.err then
    failure = failure.err
  end
  n = n + 1
  reply[n] = tostring(failure)
  -- Nothing a failed decision wrote of its reply may stay.
  for i = n + 1, n + request.width do
    reply[i] = nil
  end
  key, arg = key + request.key_count + (request.once and 1 or 0), arg + request.args
end
return reply
