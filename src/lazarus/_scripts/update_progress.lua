--[[
  update_progress: sets a job's progress (any state; the job stays where it is).

  KEYS[1]  job
  KEYS[2]  events

  ARGV[1]  id
  ARGV[2]  progress         JSON text: a number or an object
  ARGV[3]  maxlen

  Returns: 1, or -1 (JOB_NOT_FOUND) when the job is gone (nothing is written).
  Events:  progress (jobId, data: the progress JSON)
]]
-- @include events

if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
redis.call('HSET', KEYS[1], 'progress', ARGV[2])
emit(KEYS[2], ARGV[3], 'progress', 'jobId', ARGV[1], 'data', ARGV[2])
return 1
