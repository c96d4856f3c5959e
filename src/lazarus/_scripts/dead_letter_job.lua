--[[
  dead_letter_job: active -> dead letter: the job leaves the source queue and a dead letter
  with its payload and full failure history enters the dead letter queue's store, in
  one step; then optionally claims the next job of the source queue.

  Both queues' keys must live in one slot (always true on a single Redis).

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
  KEYS[12] dlq_dl           the dead letter queue's store prefix
  KEYS[13] dlq_marker
  KEYS[14] dlq_events
  KEYS[15] dlq_meta
  KEYS[16] dead_letter      the hash of the new dead letter
  KEYS[17] reply            the worker slot's reply memo (includes/once.lua)

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
  ARGV[11] dead_letter_id
  ARGV[12] maxlen
  ARGV[13] fetch_next
  ARGV[14] token_base
  ARGV[15] lock_ms

  A replayed job (replayOf, replayDlq = this dead letter queue) whose dead letter still
  waits for it goes back into that dead letter (pending, or failed past the queue's
  maxReplays) with its attempts appended, instead of making a new one.

  Returns: {0, next_due, job | false}, or {code}: -1, -2, -3 as complete_job, and a second
           run answers as the first, as complete_job.
  Events:  source: failed (jobId, failedReason, attemptsMade, deadLettered),
           deadLettered (jobId, queue, deadLetterQueue, deadLetterId, failedReason, reason);
           dead letter queue: waiting (jobId of the dead letter), and statusChanged when a
           replay came back; then those of claim_jobs
  Outbox:  dead-lettered (or the status a returning replay re-enters), then as claim_jobs
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
local dlq = {dl = KEYS[12], marker = KEYS[13], events = KEYS[14], meta = KEYS[15]}
local id = ARGV[1]
local now = tonumber(ARGV[3])
local maxlen = ARGV[12]
-- The job's fields come with the lease check, in one read; its hash goes below.
local code, held = release(q, id, ARGV[2], DEAD_LETTER_FIELDS, true)
if code ~= 0 then return outcome_refused(q, KEYS[17], id, ARGV[2], code, ARGV[14]) end
local f = failed_fields({unpack(held, 5)}, ARGV[4], ARGV[5], ARGV[6], ARGV[7])
dead_letter(q, id, dlq, KEYS[16], ARGV[11], now, ARGV[8], ARGV[9], ARGV[10], maxlen, f)
local job = false
if ARGV[13] == '1' then
  promote_delayed(q, now, maxlen)
  job = claim_next(q, now, ARGV[14], tonumber(ARGV[15]), maxlen)
end
return outcome_done(q, KEYS[17], id, ARGV[2], job, ARGV[14], tonumber(ARGV[15]))
