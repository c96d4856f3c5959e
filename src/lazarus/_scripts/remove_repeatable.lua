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

  ARGV[1]  key              the schedule's key
  ARGV[2]  maxlen

  Returns: 1 removed, 0 no such schedule.
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
redis.call('DEL', schedule)
redis.call('ZREM', KEYS[11], key)
local id = occurrence_id(key, next)
local removed = redis.call('ZREM', q.delayed, id) == 1 or redis.call('ZREM', q.prioritized, id) == 1
  or wait_remove(q, id)
if removed then
  drop_job(q.job_prefix .. id)
  emit(q.events, ARGV[2], 'removed', 'jobId', id)
end
return 1
