--[[
  repeat_job: schedule -> its next occurrence [*] -> delayed | waiting, once the pending one
  was claimed. A compare-and-set on the schedule's next due time: of any number of producers
  advancing the same occurrence, one does; the others change nothing.

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

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  key              the schedule's key
  ARGV[4]  current          the due time of the occurrence that was claimed (ms)
  ARGV[5]  following        when the next occurrence is due (ms), or -1: the schedule ends

  Returns: 1 the next occurrence was added, 2 the schedule ended and was removed, 0 nothing to
           do (the schedule is gone, or has moved past `current` already).
  Events:  delayed | waiting (jobId) for the occurrence added
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include repeat

local q = queue_keys(1)
local key, schedule = ARGV[3], KEYS[12]
if redis.call('HGET', schedule, 'next') ~= ARGV[4] then return 0 end
local following = tonumber(ARGV[5])
if following < 0 then
  redis.call('DEL', schedule)
  redis.call('ZREM', KEYS[11], key)
  return 2
end
redis.call('HSET', schedule, 'next', following)
redis.call('ZADD', KEYS[11], following, key)
add_occurrence(q, schedule, key, following, tonumber(ARGV[1]), ARGV[2])
return 1
