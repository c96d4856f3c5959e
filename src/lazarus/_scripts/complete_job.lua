--[[
  complete_job: active -> completed (or removed, per retention), then optionally claims the
  next job so that a busy worker needs one round trip per job.

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
  KEYS[12] completed
  KEYS[13] reply            the worker slot's reply memo (includes/once.lua)
  KEYS[14] dlq_dl           KEYS[14..16] only for a replayed job: its dead letter queue's
  KEYS[15] dlq_events       store prefix and events, and its dead letter's hash
  KEYS[16] dead_letter

  ARGV[1]  id
  ARGV[2]  token            the lock token the worker holds; with id, the memo's call id
  ARGV[3]  now
  ARGV[4]  returnvalue      JSON text
  ARGV[5]  keep_count       retention: newest completed jobs to keep, -1 for all
  ARGV[6]  keep_age         retention: milliseconds to keep them, -1 for ever
  ARGV[7]  remove_now       1 to delete the job at once
  ARGV[8]  maxlen
  ARGV[9]  fetch_next       1 to claim the next job
  ARGV[10] token_base
  ARGV[11] lock_ms
  ARGV[12] dead_letter_id   the id of the replayed job's dead letter; '' for none

  A replayed job's dead letter, when it still waits for this job (processing, dlq:replayJob
  = id), becomes resolved in the same step.

  Returns: {0, next_due, job | false}, or {code}: -1 JOB_NOT_FOUND, -2 LOCK_MISMATCH,
           -3 NOT_ACTIVE (the worker lost the job: nothing is changed). A second run of a
           call that finished the job (same id and token) changes nothing and answers as the
           first did: {0, next_due, the job it claimed if still held | false}.
  Events:  completed (jobId, returnvalue); dead letter queue: statusChanged (jobId, from, to,
           actor, note) when a dead letter is resolved; then those of claim_jobs
  Outbox:  resolved (when a replayed dead letter is resolved), then as claim_jobs
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include enqueue
-- @include claim
-- @include once
-- @include finish
-- @include dedup
-- @include store

local q = queue_keys(1)
local key = KEYS[11]
local id = ARGV[1]
local now = tonumber(ARGV[3])
local maxlen = ARGV[8]
-- Removed on completion, the job leaves with its hash: its lease's token goes with it.
local code, held = release(q, id, ARGV[2], nil, ARGV[7] == '1')
if code ~= 0 then return outcome_refused(q, KEYS[13], id, ARGV[2], code, ARGV[10]) end
local made = (tonumber(held[2]) or 0) + 1
dedup_release(q.job_prefix, id, true, held[3])
local dl_id = ARGV[12]
if dl_id ~= '' and redis.call('HGET', key, 'replayOf') == dl_id then
  local rec = redis.call('HMGET', KEYS[16], 'dlq:replayJob', 'dlq:status')
  if rec[1] == id and rec[2] == 'processing' then
    store_set_status(KEYS[14], dl_id, KEYS[16], 'resolved', now, 'policy', false,
      {'job', cjson.encode(id)})
    emit(KEYS[15], maxlen, 'statusChanged', 'jobId', dl_id, 'from', 'processing',
      'to', 'resolved', 'actor', 'policy', 'note', '')
  end
end
if ARGV[7] == '1' then
  drop_job(q, id, now, held[4])
else
  redis.call('HSET', key, 'attemptsMade', int_text(made), 'returnvalue', ARGV[4],
    'finishedOn', int_text(now))
  redis.call('ZADD', KEYS[12], int_text(now), id)
  retain(KEYS[12], q, tonumber(ARGV[5]), tonumber(ARGV[6]), now)
end
emit(q.events, maxlen, 'completed', 'jobId', id, 'returnvalue', ARGV[4])
metrics_count(q, 'c', now)
local job = false
if ARGV[9] == '1' then
  promote_delayed(q, now, maxlen)
  job = claim_next(q, now, ARGV[10], tonumber(ARGV[11]), maxlen)
end
return outcome_done(q, KEYS[13], id, ARGV[2], job, ARGV[10], tonumber(ARGV[11]))
