--[[
  dead_letter_in: moving -> dead letter, the second step of a cross-slot move
  (docs/redis-cluster.md): the job recorded by dead_letter_out (or sweep_stalled) in its
  queue's moves hash enters the dead letter queue's store as the dead letter named by the
  move, exactly as dead_letter_job would have added it on one slot. Idempotent: the move's id
  is remembered in the dead letter queue's own slot (KEYS[6], for a week), and a move seen
  before changes nothing, even if its dead letter was replayed or purged since.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_marker
  KEYS[3]  dlq_events
  KEYS[4]  dlq_meta
  KEYS[5]  dead_letter      the hash of the new dead letter (the move's id)
  KEYS[6]  arrived          ZSET of the moves added, score = when (ms)

  ARGV[1]  move             the move, as JSON (includes/move_out.lua)
  ARGV[2]  now
  ARGV[3]  maxlen

  A replayed job whose dead letter (in this queue) still waits for it goes back into that
  dead letter instead, as on one slot.

  Returns: {dead letter id, added}: the dead letter holding the job, and 1 when this call
           added it (0: an earlier call did).
  Events:  dead letter queue: waiting (jobId of the dead letter), and statusChanged when a
           replay came back
  Outbox:  dead-lettered (or the status a returning replay re-enters), while the dead letter
           queue's outbox is on (includes/outbox.lua)
]]
-- @include events
-- @include dead_letter
-- @include moves_in

local mv = cjson.decode(ARGV[1])
local now = tonumber(ARGV[2])
local maxlen = ARGV[3]
local dlq = {dl = KEYS[1], marker = KEYS[2], events = KEYS[3], meta = KEYS[4]}
local f = mv['fields']
local lines = mv['logs']
if move_taken_in(KEYS[6], mv['dl']) then return {mv['dl'], 0} end
remember_move(KEYS[6], mv['dl'], now)

-- replace_logs(key): the move's log lines become the logs of dead letter hash `key`.
local function replace_logs(key)
  local target = logs_key(key)
  redis.call('DEL', target)
  for i = 1, #lines, 1000 do
    redis.call('RPUSH', target, unpack(lines, i, math.min(i + 999, #lines)))
  end
end

-- A replay coming back to the dead letter that still waits for it (return_to_record).
if f['replayOf'] and f['replayDlq'] == mv['target'] then
  local rec_id = f['replayOf']
  local rec_key = store_head(dlq.dl) .. 'job:' .. rec_id
  local rec = redis.call('HMGET', rec_key, 'dlq:replayJob', 'dlq:status')
  -- In the processing index too: a whole-store purge detaches it before the hash goes.
  if rec[1] == mv['id'] and rec[2] == 'processing'
      and redis.call('ZSCORE', dlq.dl .. 'i:s:processing', rec_id) then
    local replays = tonumber(f['rc']) or 0
    local limit = tonumber(redis.call('HGET', dlq.meta, 'maxReplays') or '') or DEFAULT_MAX_REPLAYS
    local status = replays >= limit and 'failed' or 'pending'
    local from = store_set_status(dlq.dl, rec_id, rec_key, status, now, 'policy', false,
      {'job', cjson.encode(mv['id']), 'queue', cjson.encode(mv['source']),
       'reason', cjson.encode(mv['reason']), 'error', cjson.encode(f['failedReason'] or '')})
    store_remove(dlq.dl, rec_id, rec_key, false, now)
    json_concat(rec_key, 'dlq:stacktrace', f['stacktrace'])
    json_concat(rec_key, 'dlq:attempts', f['attempts'])
    local made = (tonumber(redis.call('HGET', rec_key, 'dlq:attemptsMade')) or 0)
      + (tonumber(f['attemptsMade']) or 0)
    redis.call('HSET', rec_key, 'dlq:failedReason', f['failedReason'] or '',
      'dlq:errorType', f['errorType'] or '', 'dlq:reason', mv['reason'],
      'dlq:deadLetteredAt', mv['at'], 'dlq:attemptsMade', made, 'dlq:replayCount', replays)
    local values, _, origin = store_values(rec_key)
    store_add(dlq.dl, rec_id, values, mv['at'], origin)
    if #lines > 0 then replace_logs(rec_key) end
    redis.call('ZADD', dlq.marker, 0, '0')
    emit(dlq.events, maxlen, 'statusChanged', 'jobId', rec_id, 'from', from, 'to', status,
      'actor', 'policy', 'note', '')
    emit(dlq.events, maxlen, 'waiting', 'jobId', rec_id)
    count_dead_letter(dlq.meta, mv['at'], mv['reason'], mv['source'])
    return {rec_id, 1}
  end
end

local dl_key = KEYS[5]
redis.call('HSET', dl_key,
  'name', f['name'] or '', 'data', f['data'] or 'null',
  'dlq:sourceQueue', mv['source'], 'dlq:originalJobId', mv['id'],
  'dlq:failedReason', f['failedReason'] or '', 'dlq:errorType', f['errorType'] or '',
  'dlq:stacktrace', f['stacktrace'] or '[]', 'dlq:attempts', f['attempts'] or '[]',
  'dlq:attemptsMade', f['attemptsMade'] or 0, 'dlq:deadLetteredAt', mv['at'],
  'dlq:originalTimestamp', f['timestamp'] or mv['at'], 'dlq:originalOpts', f['opts'] or '{}',
  'dlq:reason', mv['reason'], 'dlq:atm', f['atm'] or 1, 'dlq:status', 'pending')
-- Zeros are the defaults readers assume: left out, they cost no memory.
local optional = {'dlq:replayCount', f['rc'], 'dlq:priority', f['priority'],
  'dlq:delay', f['delay'], 'progress', f['progress']}
for i = 1, #optional, 2 do
  if optional[i + 1] and optional[i + 1] ~= '0' then
    redis.call('HSET', dl_key, optional[i], optional[i + 1])
  end
end
store_add(dlq.dl, mv['dl'], {mv['source'], f['name'] or '', f['errorType'] or '', mv['reason'],
  'pending'}, mv['at'], mv['id'])
if #lines > 0 then replace_logs(dl_key) end
redis.call('ZADD', dlq.marker, 0, '0')
emit(dlq.events, maxlen, 'waiting', 'jobId', mv['dl'])
count_dead_letter(dlq.meta, mv['at'], mv['reason'], mv['source'])
return {mv['dl'], 1}
