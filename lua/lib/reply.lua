-- A remaining count this close to 2^53 goes as text: a RESP3 client (ioredis 6) reads an integer
-- reply digit by digit through a sum that passes 2^53 and rounds it. Times stay far below.
local WIRE_EXACT = 9007199254740991 - 128

-- The reply of a one-window decision, as decide.lua answers it: now × 2 + allowed (1 or 0),
-- remaining, reset_at and fits_at, -1 when the cost can never fit. Appended after `n`; returns
-- the new length.
local function append_one(reply, n, allowed, now, remaining, reset_at, fits_at)
  if fits_at == NEVER then
    fits_at = -1
  end
  if remaining > WIRE_EXACT then
    remaining = fmt(remaining)
  end
  reply[n + 1], reply[n + 2], reply[n + 3], reply[n + 4] = floor(now) * 2 + (allowed and 1 or 0), remaining, reset_at, fits_at
  return n + 4
end

-- One window's part of a reply, as decide.lua answers it for decisions of several targets or
-- windows: remaining, reset_at and fits_at, -1 when the cost can never fit. append_one keeps
-- its own copy of this: it is the hottest path, and a call per decision shows there.
local function append_window(reply, n, remaining, reset_at, fits_at)
  if fits_at == NEVER then
    fits_at = -1
  end
  if remaining > WIRE_EXACT then
    remaining = fmt(remaining)
  end
  reply[n + 1], reply[n + 2], reply[n + 3] = remaining, reset_at, fits_at
  return n + 3
end
