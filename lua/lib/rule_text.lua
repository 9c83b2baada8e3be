-- A rule as every script receives it: 'code window window …', code one of `modules`' keys ('sl',
-- 'fw', 'sw', 'tb') and each window 'limit period', or 'limit period/low_burst' for one that
-- sheds. A batch's keys of one rule send the same text, so a reader parses each text once per
-- call and builds each code's module once.

-- The reader of rule texts for these modules (code → the function that builds the module): it
-- answers { code, module, windows }, windows as { limit, period, low_burst (nil: no shedding) },
-- the same table for the same text.
local function rule_reader(modules)
  local built, rules = {}, {}
  return function(text)
    local rule = rules[text]
    if rule then
      return rule
    end
    local code, rest = string.match(text, '^(%a+) (.*)$')
    local module = built[code]
    if not module then
      local build = modules[code]
      if not build then
        error('no algorithm ' .. tostring(code) .. ' in this script, in the rule ' .. text)
      end
      module = build()
      built[code] = module
    end
    local windows = {}
    for limit, period, low_burst in string.gmatch(rest, '(%d+) (%d+)/?(%d*)') do
      windows[#windows + 1] = { limit = tonumber(limit), period = tonumber(period), low_burst = tonumber(low_burst) }
    end
    rule = { code = code, module = module, windows = windows }
    rules[text] = rule
    return rule
  end
end
