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
  ARGV[3]  at               '' at first; then where the caller found the job in the wait list
                            (includes/enqueue.lua's wait_remove)

  Returns: 1 removed, -1 JOB_NOT_FOUND, -6 JOB_STATE (the job is active), or {-9, from, id}
           WAIT_SEARCH: nothing written; the job may be deep inside a long wait list: the
           caller looks for it there from index `from` and calls again with where it is.
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
  local removed, from = wait_remove(q, id, tonumber(ARGV[3]))
  if removed == nil then return {-9, from, id} end
end
dedup_release(q.job_prefix, id, false)
drop_job(q, id)
emit(q.events, ARGV[2], 'removed', 'jobId', id)
return 1
