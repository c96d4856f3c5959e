-- A call's time budget. A script that acts on a caller's list of items asks budget_spent()
-- after each item and stops there when it says so, returning one result per item it handled:
-- fewer than it was given when the budget ran out, and the caller sends the rest again. However
-- large the list and its items, one call holds Redis for about the budget (and one item).
local budget_until = 0
local budget_asked = 0

-- budget_start(call_us): the loop's budget runs out after BUDGET_LOOP_SHARE of the call's,
-- `call_us` microseconds from now; the rest is for what the script writes after its loop (the
-- last of store_batch's steps: a fixed number of dead letters' index writes at most).
local BUDGET_LOOP_SHARE = 0.75
local function budget_start(call_us)
  local t = redis.call('TIME')
  budget_until = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(call_us) * BUDGET_LOOP_SHARE
end

-- budget_spent(): whether the budget ran out; reads the clock at every fourth ask.
local function budget_spent()
  budget_asked = budget_asked + 1
  if budget_asked % 4 ~= 0 then return false end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2]) >= budget_until
end
