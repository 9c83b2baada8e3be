-- Writes that give units back (refunds, undos, resets) are sent with an operation's key, so that
-- a command sent again after a lost reply (ioredis resends on reconnecting) applies once: the key
-- is set once the operation ran, and an operation that finds it set writes nothing.

-- How long an operation's key says it ran: longer than a client retries a command whose reply it
-- lost (ioredis resends on reconnecting, and by default gives up after 20 attempts, within about
-- ten seconds), and short enough that a process refunding thousands a second keeps few keys.
local OPERATION_TTL_MS = 60000

local function operation_ran(key)
  return redis.call('EXISTS', key) == 1
end

-- `note`, when given, is what the operation needs to answer the same when sent again (sync.lua:
-- the entries it did not push); '1' otherwise.
local function operation_done(key, note)
  redis.call('SET', key, note or '1', 'PX', OPERATION_TTL_MS)
end

-- The note an operation's key holds, false before the operation ran.
local function operation_note(key)
  return redis.call('GET', key)
end

-- For an operation whose reply says what it did (a lease script's reservations): the reply it
-- gave, kept with its key, so that the operation sent again answers the same; nil before it ran.
-- MessagePack, not JSON: it keeps integers up to 2^53 exact, where cjson prints 14 digits.
local function operation_reply(key)
  local kept = redis.call('GET', key)
  if kept then
    return cmsgpack.unpack(kept)
  end
  return nil
end

local function operation_keep(key, reply)
  redis.call('SET', key, cmsgpack.pack(reply), 'PX', OPERATION_TTL_MS)
end
