--[[
  remove_job: waiting | prioritized | delayed | completed | failed | dead letter -> [*]. An
  active job cannot be removed (its worker owns it).

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
  ARGV[2]  maxlen

  Returns: 1 removed, -1 JOB_NOT_FOUND, -6 JOB_STATE (the job is active).
  Events:  removed (jobId)
  Outbox:  removed, when the job was a dead letter (with its fields)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include queue_keys
-- @include store
-- @include dedup
-- @include job_logs
-- @include enqueue

local q = queue_keys(1)
local id = ARGV[1]
if redis.call('EXISTS', KEYS[13]) == 0 then return -1 end
if redis.call('ZSCORE', q.leases, id) then return -6 end
-- Not active (no lease: a claim gives one with the active list's entry, and every release
-- takes both), so in at most one of the other places; the wait list, the one that costs a
-- search, is the place left when the job is in none of the sets (job_state.lua).
if redis.call('ZREM', q.prioritized, id) == 0 and redis.call('ZREM', q.delayed, id) == 0
    and redis.call('ZREM', KEYS[11], id) == 0 and redis.call('ZREM', KEYS[12], id) == 0
    and not store_remove(q.dl, id, KEYS[13], 'removed', '') then
  wait_remove(q, id)
end
dedup_release(q.job_prefix, id, false)
drop_job(KEYS[13])
emit(q.events, ARGV[2], 'removed', 'jobId', id)
return 1
