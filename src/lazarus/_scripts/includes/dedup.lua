-- @include job_logs
-- Deduplication: a job added with deduplication {id, ttl} takes the key
-- '<prefix>:{<queue>}:de:<id>' (value: the job's id), derived from job_prefix as the dead
-- letter store's prefix is: with a ttl for that long, without one until the job completes,
-- fails (or is dead-lettered) or is removed. The job's hash keeps the id in 'deid'.

-- dedup_key(job_prefix, dedup_id): the key of one deduplication id.
local function dedup_key(job_prefix, dedup_id)
  return string.sub(job_prefix, 1, -5) .. 'de:' .. dedup_id
end

-- dedup_take(q, dedup_id, ttl, mode, id, now, maxlen): false when dedup_id was free and now
-- names job `id` (for ttl ms, or with ttl 0 until the job finishes); else the id of the job
-- holding it, after a 'deduplicated' event. `mode` holds 'e' (extend: a held id's ttl starts
-- again) and 'r' (replace: a holder still delayed that never ran is deleted, with a 'removed'
-- event, and `id` takes the id in its place: the last of a burst of adds is the one that
-- runs).
local function dedup_take(q, dedup_id, ttl, mode, id, now, maxlen)
  local key = dedup_key(q.job_prefix, dedup_id)
  local holder = redis.call('GET', key)
  local held = holder and q.job_prefix .. holder
  -- Only a holder that never ran: one delayed by a retry's backoff keeps its history.
  if holder and string.find(mode, 'r', 1, true) and redis.call('ZSCORE', q.delayed, holder)
      and not redis.call('HGET', held, 'ats') then
    redis.call('ZREM', q.delayed, holder)
    drop_job(q, holder, now, redis.call('HGET', held, 'timestamp'))
    emit(q.events, maxlen, 'removed', 'jobId', holder)
    holder = false
  end
  if holder then
    if ttl > 0 and string.find(mode, 'e', 1, true) then redis.call('PEXPIRE', key, ttl) end
    emit(q.events, maxlen, 'deduplicated', 'jobId', holder, 'deduplicationId', dedup_id,
      'deduplicatedJobId', id)
    return holder
  end
  if ttl > 0 then
    redis.call('SET', key, id, 'PX', ttl)
  else
    redis.call('SET', key, id)
  end
  return false
end

-- dedup_release(job_prefix, id, finished, known): free the deduplication id job `id` holds
-- (its hash still present). A job that finished keeps an id taken with a ttl until the ttl
-- runs out; a removed one frees it at once. An id another job holds by now is left alone.
-- `known`, when given, is the job's 'deid' field as read already (false: it has none).
local function dedup_release(job_prefix, id, finished, known)
  local dedup_id = known
  if dedup_id == nil then dedup_id = redis.call('HGET', job_prefix .. id, 'deid') end
  if not dedup_id then return end
  local key = dedup_key(job_prefix, dedup_id)
  if finished and redis.call('PTTL', key) > 0 then return end
  if redis.call('GET', key) == id then redis.call('DEL', key) end
end
