--[[
  set_dead_letter_status: dead letter (any status) -> the given status, recorded in its
  timeline with time, actor and note (includes/store.lua store_set_status). With an expected
  status list, only a dead letter in one of them moves: a guard for rivals (two operators, a
  redriver and an operator) deciding at the same time.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3]  dead_letter      the dead letter's hash

  ARGV[1]  id               the dead letter's id
  ARGV[2]  status           pending | manual | processing | resolved | failed | archived
  ARGV[3]  now
  ARGV[4]  actor            redriver | operator:<name> | policy
  ARGV[5]  note             '' for none
  ARGV[6]  expect           the statuses it must be in, comma-separated; '' for any
  ARGV[7]  maxlen

  Returns: {1, previous status} when recorded, {0, current status} when it was not in an
           expected status (untouched), or {code}: -1 JOB_NOT_FOUND, -4 NOT_A_DEAD_LETTER,
           -6 JOB_STATE (not in the store: a worker on the dead letter queue holds it).
  Events:  statusChanged (jobId, from, to, actor, note) when recorded
]]
-- @include events
-- @include store

local dl, key, id, status = KEYS[1], KEYS[3], ARGV[1], ARGV[2]
local values = store_values(key)
if not values then
  return {(redis.call('EXISTS', key) == 1) and -4 or -1}
end
local current = values[5]
if not redis.call('ZSCORE', dl .. 'i:s:' .. current, id) then return {-6} end
if ARGV[6] ~= '' then
  local allowed = false
  for expected in string.gmatch(ARGV[6], '[^,]+') do
    if expected == current then allowed = true end
  end
  if not allowed then return {0, current} end
end
local from = store_set_status(dl, id, key, status, tonumber(ARGV[3]), ARGV[4], ARGV[5])
emit(KEYS[2], ARGV[7], 'statusChanged', 'jobId', id, 'from', from, 'to', status,
  'actor', ARGV[4], 'note', ARGV[5])
return {1, from}
