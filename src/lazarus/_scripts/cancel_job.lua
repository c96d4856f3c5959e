--[[
  cancel_job: ask that a job that has not ended stop. Nothing moves to an end here: the job
  ends as a failure that is not retried (JobCancelledError), recorded by a worker through the
  outcome scripts it uses for every failure, so that a cancelled job lands where the job's
  failures go (its dead letter queue, its replay's dead letter, failed) and nothing of that
  is done twice.
  - active: the job's hash is marked ('cancel' = reason) and the queue's 'cancels' count
    goes up; the workers running jobs read the count every 0.5 s and renew their leases when
    it moved, and the one that runs the job reads the mark there (extend_locks.lua), stops
    the processor and records the failure. A worker that dies meanwhile leaves the job to the stall sweep, and the worker
    that claims it again reads the mark and runs nothing.
  - waiting, prioritized or delayed: marked, and put first in line (the claim end of the wait
    list), so that the next claim takes it and its worker records the failure at once,
    without running it.

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
  KEYS[11] completed
  KEYS[12] failed
  KEYS[13] job

  ARGV[1]  id
  ARGV[2]  reason           the failure's message
  ARGV[3]  maxlen
  ARGV[4]  at               '' at first; then where the caller found the job in the wait list
                            (includes/enqueue.lua's wait_remove)

  Returns: the job's state after ('active'; 'waiting', or 'paused' in a paused queue), -1
           JOB_NOT_FOUND, -6 JOB_STATE (completed, failed or a dead letter: nothing
           written), or {-9, from, id} WAIT_SEARCH: nothing written; the caller looks for
           the job in the wait list from index `from` and calls again with where it is.
  Events:  cancelling (jobId, reason); waiting (jobId) when it is put first in line
]]
-- @include events
-- @include queue_keys
-- @include enqueue

local q = queue_keys(1)
local id, key, reason, maxlen = ARGV[1], KEYS[13], ARGV[2], ARGV[3]
if redis.call('EXISTS', key) == 0 then return -1 end
if redis.call('HEXISTS', key, 'dlq:sourceQueue') == 1 then return -6 end
if redis.call('ZSCORE', q.leases, id) then
  redis.call('HSET', key, 'cancel', reason)
  redis.call('INCR', string.sub(q.meta, 1, -5) .. 'cancels')  -- workers running jobs look now
  emit(q.events, maxlen, 'cancelling', 'jobId', id, 'reason', reason)
  return 'active'
end
if redis.call('ZSCORE', KEYS[11], id) or redis.call('ZSCORE', KEYS[12], id) then return -6 end
if redis.call('ZREM', q.prioritized, id) == 0 and redis.call('ZREM', q.delayed, id) == 0 then
  -- In none of the sets: in the wait list (job_state.lua), found there before a write.
  local removed, from = wait_remove(q, id, tonumber(ARGV[4]))
  if removed == nil then return {-9, from, id} end
  if not removed then return -6 end  -- in no place a job waits in
end
redis.call('HSET', key, 'cancel', reason)
redis.call('RPUSH', q.wait, id)  -- claims pop the tail: it is next
enqueue_mark(q)
emit(q.events, maxlen, 'cancelling', 'jobId', id, 'reason', reason)
emit(q.events, maxlen, 'waiting', 'jobId', id)
return state_told(q, 'waiting')
