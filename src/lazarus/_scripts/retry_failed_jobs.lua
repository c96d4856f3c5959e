--[[
  retry_failed_jobs: failed -> waiting | prioritized, by hand. Either the jobs named in ARGV
  (one by one), or the oldest failed jobs that failed at or before `until` (a bulk retry: the
  bound is the time the bulk began, so a job that fails again during it is not retried twice),
  at most `limit` per call. A retried job gets its attempts afresh (attemptsMade and the
  stalled counter go back to 0), and its expiry window too (retriedOn = now); its failure
  history (stacktrace, attempts) is kept.

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
  KEYS[11] failed

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  until            a bulk retry: retry jobs that failed at or before this time (ms)
  ARGV[4]  limit            a bulk retry: at most this many; 0 to retry the ids given
  ARGV[5]  budget_us        a bulk retry: the call's time budget, microseconds
                            (includes/budget.lua); else the first id (ARGV[5..]: the jobs
                            to retry)

  Returns: with ids, one code per id: 1 retried, -1 JOB_NOT_FOUND, -6 JOB_STATE (the job is
           not failed); a bulk retry {more, id, ...}: 1 when it stopped with failed entries
           left to look at (its limit or budget reached), else 0; then the ids retried.
  Events:  retried (jobId), then waiting (jobId) for each job retried
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include budget

local q = queue_keys(1)
local now = tonumber(ARGV[1])
local maxlen = ARGV[2]

local function retry(id)
  local key = q.job_prefix .. id
  redis.call('ZREM', KEYS[11], id)
  redis.call('HSET', key, 'attemptsMade', 0, 'stalledCounter', 0, 'retriedOn', now)
  redis.call('HDEL', key, 'cancel', 'failedReason', 'errorType', 'finishedOn', 'processedOn',
    'lockToken')
  emit(q.events, maxlen, 'retried', 'jobId', id)
  enqueue(q, id, tonumber(redis.call('HGET', key, 'priority') or '0') or 0, 0, now, maxlen)
end

if ARGV[4] == '0' then
  local codes = {}
  for i = 5, #ARGV do
    local id = ARGV[i]
    if redis.call('EXISTS', q.job_prefix .. id) == 0 then
      codes[#codes + 1] = -1
    elseif not redis.call('ZSCORE', KEYS[11], id) then
      codes[#codes + 1] = -6
    else
      retry(id)
      codes[#codes + 1] = 1
    end
  end
  return codes
end

-- At most RETRY_READ entries read a call: more than its budget lets it retry.
local RETRY_READ = 1000
budget_start(ARGV[5])
local limit = math.min(tonumber(ARGV[4]), RETRY_READ)
local retried = {0}
local ids = redis.call('ZRANGEBYSCORE', KEYS[11], '-inf', ARGV[3], 'LIMIT', 0, limit)
retried[1] = #ids == limit and 1 or 0
for i, id in ipairs(ids) do
  if redis.call('EXISTS', q.job_prefix .. id) == 1 then
    retry(id)
    retried[#retried + 1] = id
  else
    redis.call('ZREM', KEYS[11], id)  -- a job deleted by hand left its id behind
  end
  if i < #ids and budget_spent() then
    retried[1] = 1
    break
  end
end
return retried
