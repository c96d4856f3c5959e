-- @include job_logs
-- @include metrics
-- @include json_append
-- release(src, id, token, fields, dropping): check that `token` owns active job `id` and
-- release its lease. Returns 0 and the job's fields as read (false when absent): lockToken,
-- attemptsMade, deid, timestamp, then those of the list `fields`, if given; or the error
-- code: -1 no such job, -2 lock token mismatch, -3 not active. With `dropping` (the caller
-- deletes the job's hash in the same script), the hash keeps its lockToken until then.
local function release(src, id, token, fields, dropping)
  local key = src.job_prefix .. id
  local held = redis.call('HMGET', key, 'lockToken', 'attemptsMade', 'deid', 'timestamp',
    unpack(fields or {}))
  local owner = held[1]
  if not owner then
    if redis.call('EXISTS', key) == 0 then return -1 end
    return -2
  end
  if owner ~= token then return -2 end
  -- Claims push to the head of the active list, so the job that ends is mostly near its
  -- tail: LREM searches from there (-1), not through every job claimed since.
  if redis.call('LREM', src.active, '-1', id) == 0 then return -3 end
  redis.call('ZREM', src.leases, id)
  if not dropping then redis.call('HDEL', key, 'lockToken') end
  return 0, held
end

-- retain(set, q, keep_count, keep_age_ms, now): apply a retention policy to a finished set
-- (completed or failed) of queue q: keep the newest keep_count (-1: all) and nothing older than
-- keep_age_ms (-1: any age). At most RETAIN_AT_MOST removals per policy and call keep the
-- script short when many jobs age out at once, or a smaller count meets a large set: every
-- job that finishes removes some of the rest.
local RETAIN_AT_MOST = 200
local function retain(set, q, keep_count, keep_age_ms, now)
  if keep_age_ms >= 0 then
    local old = redis.call('ZRANGEBYSCORE', set, '-inf', now - keep_age_ms, 'LIMIT', 0,
      RETAIN_AT_MOST)
    if #old > 0 then
      drop_jobs(q, old, now)
      redis.call('ZREM', set, unpack(old))
    end
  end
  if keep_count >= 0 then
    local excess = math.min(redis.call('ZCARD', set) - keep_count, RETAIN_AT_MOST)
    if excess > 0 then
      drop_jobs(q, redis.call('ZRANGE', set, 0, excess - 1), now)
      redis.call('ZREMRANGEBYRANK', set, 0, excess - 1)
    end
  end
end

-- failure_appended(made, stacktrace, attempts, stack_json, attempt_json): a job's
-- attemptsMade, stacktrace and attempts fields (as read) after one more failed attempt.
local function failure_appended(made, stacktrace, attempts, stack_json, attempt_json)
  return (tonumber(made) or 0) + 1, json_appended(stacktrace, stack_json),
    json_appended(attempts, attempt_json)
end

-- record_failure(key, now, reason, error_type, stack_json, attempt_json, f): write one failed
-- attempt into the job hash; returns the new attemptsMade. `f` is the hash's attemptsMade,
-- stacktrace and attempts when the caller read them already (release), else nil.
local function record_failure(key, now, reason, error_type, stack_json, attempt_json, f)
  f = f or redis.call('HMGET', key, 'attemptsMade', 'stacktrace', 'attempts')
  local made, stacktrace, attempts = failure_appended(f[1], f[2], f[3], stack_json,
    attempt_json)
  redis.call('HSET', key, 'attemptsMade', int_text(made), 'failedReason', reason,
    'errorType', error_type, 'finishedOn', int_text(now), 'stacktrace', stacktrace,
    'attempts', attempts)
  return made
end
