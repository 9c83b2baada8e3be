-- State of the counter algorithms: one string per key, `period v1 v2 … period v1 v2 …`.
-- Entries are looked up by period, so a rule whose windows change keeps the state of the
-- periods it still has and starts the new ones fresh.

local function decode_counters(raw, arity)
  local state = {}
  if not raw then
    return state
  end
  local values = {}
  for token in string.gmatch(raw, '%S+') do
    values[#values + 1] = tonumber(token)
  end
  for i = 1, #values, arity + 1 do
    local entry = {}
    for j = 1, arity do
      entry[j] = values[i + j]
    end
    state[values[i]] = entry
  end
  return state
end

local function save_counters(key, state, windows, now, expires_at)
  local ttl = expires_at - now
  if ttl <= 0 then
    redis.call('DEL', key)
    return
  end
  local parts = {}
  for _, w in ipairs(windows) do
    local entry = state[w.period]
    if entry then
      parts[#parts + 1] = fmt(w.period)
      for j = 1, #entry do
        parts[#parts + 1] = fmt(entry[j])
      end
    end
  end
  redis.call('SET', key, table.concat(parts, ' '), 'PX', fmt(ttl))
end
