--[[
  postpone_job: active -> delayed | waiting | prioritized without spending an attempt (the
  processor raised RateLimitError: the service it calls asked it to come back later); then
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
  KEYS[12] reply            the worker slot's reply memo (includes/once.lua)

  ARGV[1]  id
  ARGV[2]  token            with id, the memo's call id
  ARGV[3]  now
  ARGV[4]  delay            milliseconds until the job may run again
  ARGV[5]  maxlen
  ARGV[6]  fetch_next
  ARGV[7]  token_base
  ARGV[8]  lock_ms

  Returns: {0, next_due, job | false}, or {code}: -1, -2, -3 as complete_job, and a second
           run answers as the first, as complete_job.
  Events:  rateLimited (jobId, delay), delayed | waiting, then those of claim_jobs
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include enqueue
-- @include claim
-- @include once
-- @include finish

local q = queue_keys(1)
local id = ARGV[1]
local now = tonumber(ARGV[3])
local delay = tonumber(ARGV[4])
local maxlen = ARGV[5]
local code = release(q, id, ARGV[2])
if code ~= 0 then return outcome_refused(q, KEYS[12], id, ARGV[2], code, ARGV[7]) end
emit(q.events, maxlen, 'rateLimited', 'jobId', id, 'delay', delay)
local priority = tonumber(redis.call('HGET', KEYS[11], 'priority') or '0') or 0
enqueue(q, id, priority, delay, now, maxlen)
local job = false
if ARGV[6] == '1' then
  promote_delayed(q, now, maxlen)
  job = claim_next(q, now, ARGV[7], tonumber(ARGV[8]), maxlen)
end
return outcome_done(q, KEYS[12], id, ARGV[2], job, ARGV[7], tonumber(ARGV[8]))
