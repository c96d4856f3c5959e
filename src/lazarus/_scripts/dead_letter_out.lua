--[[
  dead_letter_out: active -> moving to a dead letter queue in another Redis Cluster slot, the
  first step of a cross-slot move (docs/redis-cluster.md): the job leaves the source queue and
  the move is recorded in the source's moves hash (includes/move_out.lua), in one step; then
  optionally claims the next job of the source queue. dead_letter_in then adds it to the dead
  letter queue, and the moves entry is deleted.

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
  KEYS[12] moves            the source queue's moves hash
  KEYS[13] reply            the worker slot's reply memo (includes/once.lua)

  ARGV[1]  id
  ARGV[2]  token            with id, the memo's call id
  ARGV[3]  now
  ARGV[4]  failed_reason
  ARGV[5]  error_type
  ARGV[6]  stack_json
  ARGV[7]  attempt_json
  ARGV[8]  reason           attempts_exhausted | unrecoverable | discarded | undecodable |
                            cancelled | expired
  ARGV[9]  source_queue     the source queue's name
  ARGV[10] dead_letter_queue  the dead letter queue's name
  ARGV[11] dead_letter_id   the move's id, and the dead letter's
  ARGV[12] maxlen
  ARGV[13] fetch_next
  ARGV[14] token_base
  ARGV[15] lock_ms

  Returns: {0, next_due, job | false}, or {code}: -1, -2, -3 as complete_job, and a second
           run answers as the first, as complete_job.
  Events:  source: failed (jobId, failedReason, attemptsMade, deadLettered),
           deadLettered (jobId, queue, deadLetterQueue, deadLetterId, failedReason, reason);
           then those of claim_jobs (the dead letter queue's come with dead_letter_in)
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include enqueue
-- @include claim
-- @include once
-- @include finish
-- @include move_out

local q = queue_keys(1)
local id = ARGV[1]
local now = tonumber(ARGV[3])
local maxlen = ARGV[12]
local code = release(q, id, ARGV[2])
if code ~= 0 then return outcome_refused(q, KEYS[13], id, ARGV[2], code, ARGV[14]) end
record_failure(KEYS[11], now, ARGV[4], ARGV[5], ARGV[6], ARGV[7])
move_out(q, id, KEYS[12], ARGV[11], now, ARGV[8], ARGV[9], ARGV[10], maxlen)
local job = false
if ARGV[13] == '1' then
  promote_delayed(q, now, maxlen)
  job = claim_next(q, now, ARGV[14], tonumber(ARGV[15]), maxlen)
end
return outcome_done(q, KEYS[13], id, ARGV[2], job, ARGV[14], tonumber(ARGV[15]))
