--[[
  remove_repeatable: schedule -> [*], with its pending occurrence when that has not started
  (delayed, waiting or prioritized); one already running finishes as any job does.

  KEYS[1]  wait
  KEYS[2]  prioritized
  KEYS[3]  pc
  KEYS[4]  delayed
  KEYS[5]  active
  KEYS[6]  leases
  KEYS[7]  marker
  KEYS[8]  meta
  KEYS[9]  events
  KEYS[10] job_prefix
  KEYS[11] repeat           the index of the queue's schedules
  KEYS[12] schedule         the hash of this schedule
  KEYS[13] completed
  KEYS[14] failed

  ARGV[1]  key              the schedule's key
  ARGV[2]  maxlen
  ARGV[3]  at               as remove_job's

  Returns: 1 removed, 0 no such schedule, or {-9, from, id} as remove_job (nothing written;
           id is the occurrence's).
  Events:  removed (jobId) for the pending occurrence removed
]]
-- @include events
-- @include queue_keys
-- @include job_logs
-- @include repeat
-- @include enqueue

local q = queue_keys(1)
local key, schedule = ARGV[1], KEYS[12]
local next = redis.call('HGET', schedule, 'next')
if not next then return 0 end
local id = occurrence_id(schedule, key, next)
local removed = redis.call('ZREM', q.delayed, id) == 1 or redis.call('ZREM', q.prioritized, id) == 1
-- Neither, nor running or finished: then waiting, the one place left (job_state.lua).
if not removed and redis.call('EXISTS', q.job_prefix .. id) == 1
    and not redis.call('ZSCORE', q.leases, id) and not redis.call('ZSCORE', KEYS[13], id)
    and not redis.call('ZSCORE', KEYS[14], id) then
  local found, from = wait_remove(q, id, tonumber(ARGV[3]))
  if found == nil then return {-9, from, id} end
  removed = found
end
redis.call('DEL', schedule)
redis.call('ZREM', KEYS[11], key)
if removed then
  drop_job(q, id)
  emit(q.events, ARGV[2], 'removed', 'jobId', id)
end
return 1
