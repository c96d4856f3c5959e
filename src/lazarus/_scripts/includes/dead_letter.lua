-- @include store
-- @include metrics
-- @include dedup
-- @include job_logs
-- @include finish
-- count_dead_letter(meta, now, reason, source_name): keep the dead letter queue's counters in
-- its meta hash: 'count:deadLettered:<reason>:<source queue>' and per-minute buckets
-- 'rate:<minute>' for the last two hours (older buckets go when a new minute starts).
local function count_dead_letter(meta, now, reason, source_name)
  redis.call('HINCRBY', meta, 'count:deadLettered:' .. reason .. ':' .. source_name, '1')
  local minute = math.floor(now / 60000)
  if redis.call('HINCRBY', meta, 'rate:' .. int_text(minute), '1') == 1 then
    for _, field in ipairs(redis.call('HKEYS', meta)) do
      local m = tonumber(string.match(field, '^rate:(%d+)$'))
      if m and m < minute - 120 then redis.call('HDEL', meta, field) end
    end
  end
end

-- json_concat(key, field, array): append the elements of the JSON array text `array` to the
-- JSON array in hash field `field`, without decoding either.
local function json_concat(key, field, array)
  if not array or array == '' or array == '[]' then return end
  local current = redis.call('HGET', key, field)
  if not current or current == '' or current == '[]' then
    redis.call('HSET', key, field, array)
  else
    redis.call('HSET', key, field, string.sub(current, 1, -2) .. ',' .. string.sub(array, 2))
  end
end

-- DEFAULT_MAX_REPLAYS: replays of one dead letter before a failing replay makes it 'failed',
-- unless the dead letter queue's meta hash sets 'maxReplays'.
local DEFAULT_MAX_REPLAYS = 5

-- replay_record(id, replay_of, replay_dlq, dlq, dlq_name): the hash key and id of the dead
-- letter that job `id` is a replay of (its replayOf and replayDlq fields), when that dead
-- letter is in dlq (named dlq_name), still waits for this very job (status processing,
-- dlq:replayJob = id); else nil. Its key is built from the store prefix, in the dead letter
-- queue's own hash tag, as a job id is appended to a prefix.
local function replay_record(id, replay_of, replay_dlq, dlq, dlq_name)
  if not replay_of or replay_dlq ~= dlq_name then return nil end
  local rec_key = store_head(dlq.dl) .. 'job:' .. replay_of
  local rec = redis.call('HMGET', rec_key, 'dlq:replayJob', 'dlq:status')
  if rec[1] ~= id or rec[2] ~= 'processing' then return nil end
  -- And in the store's processing index: a whole-store purge detaches the index first and
  -- deletes the hash after, so a hash alone may be on its way out.
  if not redis.call('ZSCORE', dlq.dl .. 'i:s:processing', replay_of) then return nil end
  return rec_key, replay_of
end

-- return_to_record(src, id, f, dlq, rec_key, rec_id, now, reason, source_name, dlq_name,
-- maxlen): the replayed job `id` (`f` its DEAD_LETTER_FIELDS) failed for good: its attempts
-- and stack traces join those of the dead letter it came from, which goes back to 'pending'
-- (or 'failed' past the dead letter queue's maxReplays) with replayCount + 1, re-indexed by
-- its new error type and reason as a new arrival; the job leaves src, its logs (the record's
-- lines it was given and its own) replacing the record's. One record keeps every attempt of
-- every replay. Returns the record's id, or nil, having written nothing, when the record is
-- not in the store.
local function return_to_record(src, id, f, dlq, rec_key, rec_id, now, reason, source_name,
    dlq_name, maxlen)
  local key = src.job_prefix .. id
  local replays = tonumber(f[10]) or 0
  local limit = tonumber(redis.call('HGET', dlq.meta, 'maxReplays') or '') or DEFAULT_MAX_REPLAYS
  local status = replays >= limit and 'failed' or 'pending'
  local from = store_set_status(dlq.dl, rec_id, rec_key, status, now, 'policy', false,
    {'job', cjson.encode(id), 'queue', cjson.encode(source_name), 'reason', cjson.encode(reason),
     'error', cjson.encode(f[5] or '')})
  if not from then return nil end  -- not in the store after all: nothing written yet
  store_remove(dlq.dl, rec_id, rec_key, false, now)  -- re-indexed as a new arrival below
  json_concat(rec_key, 'dlq:stacktrace', f[7])
  json_concat(rec_key, 'dlq:attempts', f[8])
  local made = (tonumber(redis.call('HGET', rec_key, 'dlq:attemptsMade')) or 0)
    + (tonumber(f[9]) or 0)
  redis.call('HSET', rec_key, 'dlq:failedReason', f[5] or '', 'dlq:errorType', f[6] or '',
    'dlq:reason', reason, 'dlq:deadLetteredAt', int_text(now),
    'dlq:attemptsMade', int_text(made), 'dlq:replayCount', int_text(replays))
  local values, _, origin = store_values(rec_key)
  store_add(dlq.dl, rec_id, values, now, origin)
  redis.call('ZADD', dlq.marker, '0', '0')
  move_logs(job_side(src.head, 'logs', id), job_side(store_head(dlq.dl), 'logs', rec_id))
  bury(src, id, now, f[4])
  redis.call('DEL', key)
  emit(src.events, maxlen, 'failed', 'jobId', id, 'failedReason', f[5] or '',
    'attemptsMade', f[9] or 0, 'deadLettered', '1')
  emit(src.events, maxlen, 'deadLettered', 'jobId', id, 'queue', source_name,
    'deadLetterQueue', dlq_name, 'deadLetterId', rec_id, 'failedReason', f[5] or '',
    'reason', reason)
  emit(dlq.events, maxlen, 'statusChanged', 'jobId', rec_id, 'from', from, 'to', status,
    'actor', 'policy', 'note', '')
  emit(dlq.events, maxlen, 'waiting', 'jobId', rec_id)
  count_dead_letter(dlq.meta, now, reason, source_name)
  return rec_id
end

-- DEAD_LETTER_FIELDS: the fields of a job hash that dead_letter reads, in this order.
local DEAD_LETTER_FIELDS = {'name', 'data', 'opts', 'timestamp', 'failedReason', 'errorType',
  'stacktrace', 'attempts', 'attemptsMade', 'rc', 'priority', 'delay', 'atm', 'progress',
  'replayOf', 'replayDlq', 'deid'}

-- failed_fields(f, reason, error_type, stack_json, attempt_json): `f`, a job's
-- DEAD_LETTER_FIELDS as read, changed as record_failure would change them for this failed
-- attempt, written nowhere: for a job that leaves its queue for a dead letter in the same
-- script, whose hash is about to go. Returns `f`.
local function failed_fields(f, reason, error_type, stack_json, attempt_json)
  f[5], f[6] = reason, error_type
  local made
  made, f[7], f[8] = failure_appended(f[9], f[7], f[8], stack_json, attempt_json)
  f[9] = int_text(made)
  return f
end

-- dead_letter(src, id, dlq, dl_key, dl_id, now, reason, source_name, dlq_name, maxlen, f): move
-- the (already released) job `id` of queue src into the dead letter store of queue dlq (a
-- table: dl, marker, events, meta) as the dead letter `dl_id`, with its failure history, then
-- delete it from src. `f` is the job's DEAD_LETTER_FIELDS (failed_fields), or nil to read
-- them from its hash. The payload bytes are copied, never decoded. Fields every dead letter
-- shares (opts {}, priority 0, delay 0, one attempt, none made; timestamp =
-- dlq:deadLetteredAt) and zero counts are left out: readers default them. A replayed job whose
-- dead letter (in dlq) still waits for it goes back into that dead letter instead
-- (return_to_record). Returns the id of the dead letter that holds the job now.
local function dead_letter(src, id, dlq, dl_key, dl_id, now, reason, source_name, dlq_name,
    maxlen, f)
  metrics_count(src, 'f', now)
  local key = src.job_prefix .. id
  f = f or redis.call('HMGET', key, unpack(DEAD_LETTER_FIELDS))
  local rec_key, rec_id = replay_record(id, f[15], f[16], dlq, dlq_name)
  local held = rec_key and return_to_record(src, id, f, dlq, rec_key, rec_id, now, reason,
    source_name, dlq_name, maxlen)
  if held then return held end
  redis.call('HSET', dl_key,
    'name', f[1] or '', 'data', f[2],
    'dlq:sourceQueue', source_name, 'dlq:originalJobId', id, 'dlq:failedReason', f[5] or '',
    'dlq:errorType', f[6] or '', 'dlq:stacktrace', f[7] or '[]', 'dlq:attempts', f[8] or '[]',
    'dlq:attemptsMade', f[9] or '0', 'dlq:deadLetteredAt', int_text(now),
    'dlq:originalTimestamp', f[4] or int_text(now), 'dlq:originalOpts', f[3] or '{}',
    'dlq:reason', reason, 'dlq:atm', f[13] or '1',
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
  redis.call('ZADD', dlq.marker, '0', '0')
  dedup_release(src.job_prefix, id, true, f[17] or false)
  move_logs(job_side(src.head, 'logs', id), job_side(store_head(dlq.dl), 'logs', dl_id))
  bury(src, id, now, f[4])
  redis.call('DEL', key)
  emit(src.events, maxlen, 'failed', 'jobId', id, 'failedReason', f[5] or '',
    'attemptsMade', f[9] or 0, 'deadLettered', '1')
  emit(src.events, maxlen, 'deadLettered', 'jobId', id, 'queue', source_name,
    'deadLetterQueue', dlq_name, 'deadLetterId', dl_id, 'failedReason', f[5] or '',
    'reason', reason)
  emit(dlq.events, maxlen, 'waiting', 'jobId', dl_id)
  count_dead_letter(dlq.meta, now, reason, source_name)
  return dl_id
end

-- discard_terminal(src, id, reason, made, now, maxlen, deid, added): delete the (already
-- released) job `id` for good (its on_exhaustion is discard), with what it held: its logs and
-- its deduplication id; its event is discarded instead of failed. `deid` and `added` are its
-- deid (false: none) and timestamp fields when the caller read them already, else nil.
local function discard_terminal(src, id, reason, made, now, maxlen, deid, added)
  metrics_count(src, 'f', now)
  dedup_release(src.job_prefix, id, true, deid)
  drop_job(src, id, now, added)
  emit(src.events, maxlen, 'discarded', 'jobId', id, 'failedReason', reason,
    'attemptsMade', int_text(made))
end

-- fail_terminal(src, failed, id, now, keep_count, keep_age, remove_now, maxlen, f): move the
-- (already released) job `id` to the failed set and apply its retention policy. `f` is the
-- job's {failedReason, attemptsMade, timestamp, deid} when the caller knows them already,
-- else nil (they are read from its hash).
local function fail_terminal(src, failed, id, now, keep_count, keep_age, remove_now, maxlen, f)
  metrics_count(src, 'f', now)
  local key = src.job_prefix .. id
  f = f or redis.call('HMGET', key, 'failedReason', 'attemptsMade', 'timestamp', 'deid')
  dedup_release(src.job_prefix, id, true, f[4] or false)
  if remove_now == 1 then
    drop_job(src, id, now, f[3])
  else
    redis.call('ZADD', failed, int_text(now), id)
    retain(failed, src, keep_count, keep_age, now)
  end
  emit(src.events, maxlen, 'failed', 'jobId', id, 'failedReason', f[1] or '',
    'attemptsMade', f[2] or '0')
end
