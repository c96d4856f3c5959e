--[[
  fail_job: active -> failed (terminal failure, no dead letter queue configured); then
  optionally claims the next job.

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
  KEYS[12] failed
  KEYS[13] reply            the worker slot's reply memo (includes/once.lua)

  ARGV[1]  id
  ARGV[2]  token            with id, the memo's call id
  ARGV[3]  now
  ARGV[4]  failed_reason
  ARGV[5]  error_type
  ARGV[6]  stack_json
  ARGV[7]  attempt_json
  ARGV[8]  keep_count       retention of failed jobs, -1 for all
  ARGV[9]  keep_age         milliseconds, -1 for ever
  ARGV[10] remove_now       1 to delete the job at once
  ARGV[11] maxlen
  ARGV[12] fetch_next
  ARGV[13] token_base
  ARGV[14] lock_ms
  ARGV[15] discard          1 for a job whose on_exhaustion is discard: deleted at once, with
                            its logs and deduplication id (as a failed job frees it), and
                            its event is discarded instead of failed

  Returns: {0, next_due, job | false}, or {code}: -1, -2, -3 as complete_job, and a second
           run answers as the first, as complete_job.
  Events:  failed (jobId, failedReason, attemptsMade), or discarded (the same fields), then
           those of claim_jobs
  Outbox:  dead-lettered (a dead letter queue is configured), then as claim_jobs
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include enqueue
-- @include claim
-- @include once
-- @include finish
-- @include dead_letter

local q = queue_keys(1)
local id = ARGV[1]
local now = tonumber(ARGV[3])
local maxlen = ARGV[11]
-- A job discarded, or removed as it fails, leaves with its hash: nothing is written into it.
-- Otherwise what the attempt's record needs comes with the lease check, in one read.
local dropping = ARGV[15] == '1' or ARGV[10] == '1'
local code, held = release(q, id, ARGV[2], not dropping and {'stacktrace', 'attempts'} or nil,
  dropping)
if code ~= 0 then return outcome_refused(q, KEYS[13], id, ARGV[2], code, ARGV[13]) end
local made
if dropping then
  made = (tonumber(held[2]) or 0) + 1
else
  made = record_failure(KEYS[11], now, ARGV[4], ARGV[5], ARGV[6], ARGV[7],
    {held[2], held[5], held[6]})
end
if ARGV[15] == '1' then
  discard_terminal(q, id, ARGV[4], made, now, maxlen, held[3], held[4])
else
  -- release read the job's timestamp and deduplication id: nothing left to read
  fail_terminal(q, KEYS[12], id, now, tonumber(ARGV[8]), tonumber(ARGV[9]),
    tonumber(ARGV[10]), maxlen, {ARGV[4], int_text(made), held[4], held[3]})
end
local job = false
if ARGV[12] == '1' then
  promote_delayed(q, now, maxlen)
  job = claim_next(q, now, ARGV[13], tonumber(ARGV[14]), maxlen)
end
return outcome_done(q, KEYS[13], id, ARGV[2], job, ARGV[13], tonumber(ARGV[14]))
