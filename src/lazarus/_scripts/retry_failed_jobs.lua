--[[
  retry_failed_jobs: failed -> waiting | prioritized, by hand. Either the jobs named in ARGV
  (one by one), or the oldest failed jobs that failed at or before `until` (a bulk retry: the
  bound is the time the bulk began, so a job that fails again during it is not retried twice),
  at most `limit` per call. A retried job gets its attempts afresh (attemptsMade and the
  stalled counter go back to 0); its failure history (stacktrace, attempts) is kept.

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
  ARGV[3]  until            with no ids: retry jobs that failed at or before this time (ms)
  ARGV[4]  limit            with no ids: at most this many
  ARGV[5]  id               (ARGV[5..]: the jobs to retry; none for a bulk retry)

  Returns: with ids, one code per id: 1 retried, -1 JOB_NOT_FOUND, -6 JOB_STATE (the job is
           not failed); without, {looked, id, ...}: how many failed entries it took (fewer
           than `limit`: none are left), then the ids retried.
  Events:  retried (jobId), then waiting (jobId) for each job retried
]]
-- @include events
-- @include queue_keys
-- @include enqueue

local q = queue_keys(1)
local now = tonumber(ARGV[1])
local maxlen = ARGV[2]

local function retry(id)
  local key = q.job_prefix .. id
  redis.call('ZREM', KEYS[11], id)
  redis.call('HSET', key, 'attemptsMade', 0, 'stalledCounter', 0)
  redis.call('HDEL', key, 'failedReason', 'errorType', 'finishedOn', 'processedOn',
    'lockToken')
  emit(q.events, maxlen, 'retried', 'jobId', id)
  enqueue(q, id, tonumber(redis.call('HGET', key, 'priority') or '0') or 0, 0, now, maxlen)
end

if #ARGV >= 5 then
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

local retried = {0}
local ids = redis.call('ZRANGEBYSCORE', KEYS[11], '-inf', ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(ids) do
  if redis.call('EXISTS', q.job_prefix .. id) == 1 then
    retry(id)
    retried[#retried + 1] = id
  else
    redis.call('ZREM', KEYS[11], id)  -- a job deleted by hand left its id behind
  end
end
retried[1] = #ids
return retried
