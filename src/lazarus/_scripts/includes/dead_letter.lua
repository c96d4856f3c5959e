-- @include store
-- @include dedup
-- @include job_logs
-- count_dead_letter(meta, now, reason, source_name): keep the dead letter queue's counters in
-- its meta hash: 'count:deadLettered:<reason>:<source queue>' and per-minute buckets
-- 'rate:<minute>' for the last two hours (older buckets go when a new minute starts).
local function count_dead_letter(meta, now, reason, source_name)
  redis.call('HINCRBY', meta, 'count:deadLettered:' .. reason .. ':' .. source_name, 1)
  local minute = math.floor(now / 60000)
  if redis.call('HINCRBY', meta, 'rate:' .. minute, 1) == 1 then
    for _, field in ipairs(redis.call('HKEYS', meta)) do
      local m = tonumber(string.match(field, '^rate:(%d+)$'))
      if m and m < minute - 120 then redis.call('HDEL', meta, field) end
    end
  end
end

-- dead_letter(src, id, dlq, dl_key, dl_id, now, reason, source_name, dlq_name, maxlen): move the
-- (already released) job `id` of queue src into the dead letter store of queue dlq (a table:
-- dl, marker, events, meta) as the dead letter `dl_id`, with its failure history, then delete
-- it from src. The payload bytes are copied, never decoded. Fields every dead letter shares
-- (opts {}, priority 0, delay 0, one attempt, none made; timestamp = dlq:deadLetteredAt) and
-- zero counts are left out: readers default them.
local function dead_letter(src, id, dlq, dl_key, dl_id, now, reason, source_name, dlq_name, maxlen)
  local key = src.job_prefix .. id
  local f = redis.call('HMGET', key, 'name', 'data', 'opts', 'timestamp', 'failedReason',
    'errorType', 'stacktrace', 'attempts', 'attemptsMade', 'rc', 'priority', 'delay', 'atm',
    'progress')
  redis.call('HSET', dl_key,
    'name', f[1] or '', 'data', f[2],
    'dlq:sourceQueue', source_name, 'dlq:originalJobId', id, 'dlq:failedReason', f[5] or '',
    'dlq:errorType', f[6] or '', 'dlq:stacktrace', f[7] or '[]', 'dlq:attempts', f[8] or '[]',
    'dlq:attemptsMade', f[9] or 0, 'dlq:deadLetteredAt', now, 'dlq:originalTimestamp', f[4],
    'dlq:originalOpts', f[3], 'dlq:reason', reason, 'dlq:atm', f[13] or 1,
    'dlq:status', 'pending')
  -- Zeros are the defaults readers assume: left out, they cost no memory.
  local optional = {'dlq:replayCount', f[10], 'dlq:priority', f[11], 'dlq:delay', f[12],
    'progress', f[14]}
  for i = 1, #optional, 2 do
    if optional[i + 1] and optional[i + 1] ~= '0' then
      redis.call('HSET', dl_key, optional[i], optional[i + 1])
    end
  end
  store_add(dlq.dl, dl_id, {source_name, f[1] or '', f[6] or '', reason, 'pending'}, now, id)
  redis.call('ZADD', dlq.marker, 0, '0')
  dedup_release(src.job_prefix, id, true)
  move_logs(key, dl_key)
  redis.call('DEL', key)
  emit(src.events, maxlen, 'failed', 'jobId', id, 'failedReason', f[5] or '',
    'attemptsMade', f[9] or 0, 'deadLettered', '1')
  emit(src.events, maxlen, 'deadLettered', 'jobId', id, 'queue', source_name,
    'deadLetterQueue', dlq_name, 'deadLetterId', dl_id, 'failedReason', f[5] or '',
    'reason', reason)
  emit(dlq.events, maxlen, 'waiting', 'jobId', dl_id)
  count_dead_letter(dlq.meta, now, reason, source_name)
end

-- fail_terminal(src, failed, id, now, keep_count, keep_age, remove_now, maxlen): move the
-- (already released) job `id` to the failed set and apply its retention policy.
local function fail_terminal(src, failed, id, now, keep_count, keep_age, remove_now, maxlen)
  local key = src.job_prefix .. id
  local f = redis.call('HMGET', key, 'failedReason', 'attemptsMade')
  dedup_release(src.job_prefix, id, true)
  if remove_now == 1 then
    drop_job(key)
  else
    redis.call('ZADD', failed, now, id)
    retain(failed, src.job_prefix, keep_count, keep_age, now)
  end
  emit(src.events, maxlen, 'failed', 'jobId', id, 'failedReason', f[1] or '',
    'attemptsMade', f[2] or 0)
end
