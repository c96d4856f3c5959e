--[[
  retry_job: active -> delayed (backoff) | waiting | prioritized after a failed attempt with
  attempts left; then optionally claims the next job.

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
  KEYS[12] reply            the worker slot's reply memo (includes/once.lua)

  ARGV[1]  id
  ARGV[2]  token            with id, the memo's call id
  ARGV[3]  now
  ARGV[4]  delay            backoff in milliseconds
  ARGV[5]  failed_reason
  ARGV[6]  error_type
  ARGV[7]  stack_json       this attempt's stack trace, as a JSON string
  ARGV[8]  attempt_json     this attempt's record, as a JSON object
  ARGV[9]  maxlen
  ARGV[10] fetch_next
  ARGV[11] token_base
  ARGV[12] lock_ms

  Returns: {0, next_due, job | false}, or {code}: -1, -2, -3 as complete_job, and a second
           run answers as the first, as complete_job.
  Events:  retrying (jobId, attemptsMade, failedReason, delay), delayed | waiting, then those
           of claim_jobs
  Outbox:  as claim_jobs
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include enqueue
-- @include claim
-- @include once
-- @include finish

local q = queue_keys(1)
local key = KEYS[11]
local id = ARGV[1]
local now = tonumber(ARGV[3])
local delay = tonumber(ARGV[4])
local maxlen = ARGV[9]
-- What the attempt's record and the requeue need comes with the lease check, in one read.
local code, held = release(q, id, ARGV[2], {'stacktrace', 'attempts', 'priority'})
if code ~= 0 then return outcome_refused(q, KEYS[12], id, ARGV[2], code, ARGV[11]) end
local made = record_failure(key, now, ARGV[5], ARGV[6], ARGV[7], ARGV[8],
  {held[2], held[5], held[6]})
emit(q.events, maxlen, 'retrying', 'jobId', id, 'attemptsMade', int_text(made),
  'failedReason', ARGV[5], 'delay', ARGV[4])
local priority = tonumber(held[7] or '0') or 0
enqueue(q, id, priority, delay, now, maxlen)
local job = false
if ARGV[10] == '1' then
  promote_delayed(q, now, maxlen)
  job = claim_next(q, now, ARGV[11], tonumber(ARGV[12]), maxlen)
end
return outcome_done(q, KEYS[12], id, ARGV[2], job, ARGV[11], tonumber(ARGV[12]))
