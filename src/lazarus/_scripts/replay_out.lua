--[[
  replay_out: dead letter (pending | manual | failed) -> processing, and the first step of a
  move of its new job to a queue in another Redis Cluster slot (docs/redis-cluster.md): as
  replay_dead_letters, except that the new job is recorded in the dead letter queue's moves
  hash ('replay:<new id>' -> the move as JSON, includes/move_out.lua) instead of written to its
  queue; replay_in adds it there, then the entry is deleted. Sent once, as
  replay_dead_letters; a dead letter that already waits for the same new job answers
  'moving' again.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3]  dlq_meta         holds the 'count:replayed' counter
  KEYS[4]  moves            the dead letter queue's moves hash
  KEYS[5..] dead_letter     the dead letters' hashes

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  queue            the name of the queue the new jobs go to (the target)
  ARGV[4]  dead_letter_queue  the name of the dead letter queue (the new jobs' replayDlq)
  ARGV[5]  actor            redriver | policy | operator:<name>
  ARGV[6]  note             '' for none
  ARGV[7]  rule             the redrive rule that replays, '' for none
  ARGV[8]  budget_us        the call's time budget, microseconds (includes/budget.lua)
  ARGV[9]  since            as replay_dead_letters
  ARGV[10] tally            as replay_dead_letters
  ARGV[11..] per dead letter six values: dead_letter_id, new_id, opts, priority, attempts,
           data, as replay_dead_letters

  Returns: one entry per dead letter handled, in order (fewer than given when the budget
           ran out: the caller sends the rest again): 'moving', or -1, -4, -6 as
           replay_dead_letters.
  Events:  dead letter queue: statusChanged (jobId, from, to, actor, note), replayed (jobId,
           newJobId, queue); the target queue's come with replay_in
  Outbox:  processing, per dead letter replayed
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include job_logs
-- @include budget
-- @include replay_mark
-- @include tally

local dl = KEYS[1]
local now = tonumber(ARGV[1])
local maxlen = ARGV[2]
local actor, note, rule = ARGV[5], ARGV[6], ARGV[7]
local since = tonumber(ARGV[9])
local REPLAYABLE = {pending = true, manual = true, failed = true}

local batch = store_batch(dl)

-- replay_one(dl_key, dl_id, new_id, f, score, a): the dead letter waits for its new job, which
-- is recorded as a move.
local function replay_one(dl_key, dl_id, new_id, f, score, a)
  local data, from = replay_mark(batch, dl_key, dl_id, new_id, f, score, a, now, actor, note,
    rule, since)
  local fields = {name = f[2] or '', data = data,
    opts = ARGV[a + 2] ~= '' and ARGV[a + 2] or f[4] or '{}',
    priority = tostring(tonumber(ARGV[a + 3] ~= '' and ARGV[a + 3] or f[5]) or 0),
    delay = tostring(tonumber(f[6]) or 0),
    atm = tostring(ARGV[a + 4] ~= '' and ARGV[a + 4] or f[7] or 1),
    rc = tostring((tonumber(f[8]) or 0) + 1), replayOf = dl_id, replayDlq = ARGV[4]}
  -- The hash field names the new job; the name replay_in remembers names this replay: a
  -- later replay under the same id (OJS retries under the original id) is another move.
  local move = 'replay:' .. new_id
  local name = move .. ' ' .. dl_id .. ' ' .. now
  redis.call('HSET', KEYS[4], move, cjson.encode({kind = 'replay', move = name, id = new_id,
    source = ARGV[4], target = ARGV[3], at = now, fields = fields,
    logs = redis.call('LRANGE', logs_key(dl_key), 0, -1)}))
  emit(KEYS[2], maxlen, 'statusChanged', 'jobId', dl_id, 'from', from, 'to', 'processing',
    'actor', actor, 'note', note)
  emit(KEYS[2], maxlen, 'replayed', 'jobId', dl_id, 'newJobId', new_id, 'queue', ARGV[3])
  return 'moving'
end

local results = {}
local replayed = 0
budget_start(ARGV[8])
for i = 5, #KEYS do
  local a = 11 + (i - 5) * 6
  local dl_key, dl_id, new_id = KEYS[i], ARGV[a], ARGV[a + 1]
  local f = replay_read(dl_key)
  local status = f[9] or 'pending'
  local score = f[1] and REPLAYABLE[status] and redis.call('ZSCORE', dl .. 'i:s:' .. status, dl_id)
  local result
  if status == 'processing' and f[10] == new_id then
    result = 'moving'
  elseif not f[1] then
    result = (redis.call('EXISTS', dl_key) == 1) and -4 or -1
  elseif not score or replayed_since(f, since) then
    result = -6
  else
    result = replay_one(dl_key, dl_id, new_id, f, score, a)
    replayed = replayed + 1
    store_step(batch)
  end
  results[#results + 1] = result
  if budget_spent() then break end
end
store_flush(batch)
if replayed > 0 then
  redis.call('HINCRBY', KEYS[3], 'count:replayed', int_text(replayed))
  tally_add(dl, ARGV[10], replayed)
end
return results
