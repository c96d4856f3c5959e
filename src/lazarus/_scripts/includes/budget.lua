-- A call's time budget. A script that acts on a caller's list of items asks budget_spent()
-- after each item and stops there when it says so, returning one result per item it handled:
-- fewer than it was given when the budget ran out, and the caller sends the rest again. However
-- large the list and its items, one call holds Redis for about the budget (and one item).
local budget_until = 0
local budget_asked = 0

-- budget_start(us): the budget runs out `us` microseconds from now.
local function budget_start(us)
  local t = redis.call('TIME')
  budget_until = tonumber(t[1]) * 1000000 + tonumber(t[2]) + us
end

-- budget_spent(): whether the budget ran out; reads the clock at every fourth ask.
local function budget_spent()
  budget_asked = budget_asked + 1
  if budget_asked % 4 ~= 0 then return false end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) >= budget_until
end
