-- @include dedup
-- @include metrics
-- @include job_logs
-- The first step of a move across Redis Cluster slots (docs/redis-cluster.md): the job leaves
-- its queue, and the move is recorded in the queue's own slot, in the HASH
-- '<prefix>:{<queue>}:moves' (dead letter id -> the move as JSON), in the same script. The
-- second step (dead_letter_in, in the target's slot) adds it there under that id, once; then
-- the entry is deleted. A crash between the steps leaves the entry for a sweeper to finish.
-- A replayed job in transit is also named in the hash ('job:<job id>' -> dead letter id,
-- deleted with the move by clear_move.lua while it names that move): its dead letter, which
-- still waits for it, must not take it for removed meanwhile (_moves.settle).

-- move_out(src, id, moves, dl_id, now, reason, source_name, dlq_name, maxlen): record the
-- (already released) job `id` of src, with its hash and log lines, as the move `dl_id` to the
-- dead letter queue dlq_name, delete it from src and emit src's failed and deadLettered
-- events (here only, so once). Returns the id of the dead letter that will hold it: the one
-- it is a replay of when it came from dlq_name (the target decides if that one still waits
-- for it; if not, the job becomes dl_id, as on one slot).
local function move_out(src, id, moves, dl_id, now, reason, source_name, dlq_name, maxlen)
  metrics_count(src, 'f', now)
  local key = src.job_prefix .. id
  local flat = redis.call('HGETALL', key)
  local fields = {}
  for i = 1, #flat, 2 do fields[flat[i]] = flat[i + 1] end
  local logs_list = job_side(src.head, 'logs', id)
  local lines = redis.call('LRANGE', logs_list, 0, -1)
  redis.call('HSET', moves, dl_id, cjson.encode({kind = 'dead_letter', id = id, dl = dl_id,
    source = source_name, target = dlq_name, reason = reason, at = now, fields = fields,
    logs = lines}))
  if fields['replayOf'] then redis.call('HSET', moves, 'job:' .. id, dl_id) end
  dedup_release(src.job_prefix, id, true)
  bury(src, id, now, fields['timestamp'])
  redis.call('DEL', key, logs_list)
  local holder = dl_id
  if fields['replayOf'] and fields['replayDlq'] == dlq_name then holder = fields['replayOf'] end
  emit(src.events, maxlen, 'failed', 'jobId', id, 'failedReason', fields['failedReason'] or '',
    'attemptsMade', fields['attemptsMade'] or 0, 'deadLettered', '1')
  emit(src.events, maxlen, 'deadLettered', 'jobId', id, 'queue', source_name,
    'deadLetterQueue', dlq_name, 'deadLetterId', holder,
    'failedReason', fields['failedReason'] or '', 'reason', reason)
  return holder
end
