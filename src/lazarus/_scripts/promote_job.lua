--[[
  promote_job: delayed -> waiting | prioritized, now: a job waiting out a delay (its own, a
  retry's backoff, or a rate limit's postponement) is made ready at once, by priority as if
  its delay had just ended; its delay becomes 0.

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
  KEYS[11] job

  ARGV[1]  id
  ARGV[2]  now
  ARGV[3]  maxlen

  Returns: the state the job entered ('waiting' or 'prioritized'; 'paused' while the queue
           is paused, as job_state.lua tells it), -1 JOB_NOT_FOUND, or -6
           JOB_STATE (the job is not delayed: nothing written).
  Events:  promoted (jobId), then waiting (jobId)
]]
-- @include events
-- @include queue_keys
-- @include enqueue

local q = queue_keys(1)
if redis.call('EXISTS', KEYS[11]) == 0 then return -1 end
local state = promote_now(q, ARGV[1], tonumber(ARGV[2]), ARGV[3])
if not state then return -6 end
return state_told(q, state)
