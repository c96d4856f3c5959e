--[[
  settle_moved: processing -> pending | resolved for dead letters whose replayed job lives in
  another Redis Cluster slot and will never report back (docs/redis-cluster.md): the caller
  read that job's fate in its own slot first (completed: resolved; removed, or failed without
  a dead letter queue: pending), after seeing that its move had arrived. A dead letter no
  longer processing for that very job is untouched.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3..] dead_letter     the dead letters' hashes

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3..] per dead letter four values: dead_letter_id, job_id (its replayed job),
           status (pending | resolved), note

  Returns: the number of dead letters settled.
  Events:  statusChanged (jobId, from, to, actor, note) for each, actor policy
  Outbox:  the new status, per dead letter settled
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include store

local dl, now, maxlen = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local settled = 0
for i = 3, #KEYS do
  local a = 3 + (i - 3) * 4
  local rec_key, dl_id, job_id, to, note = KEYS[i], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local rec = redis.call('HMGET', rec_key, 'dlq:status', 'dlq:replayJob')
  if rec[1] == 'processing' and rec[2] == job_id then
    store_set_status(dl, dl_id, rec_key, to, now, 'policy', note, {'job', cjson.encode(job_id)})
    emit(KEYS[2], maxlen, 'statusChanged', 'jobId', dl_id, 'from', 'processing', 'to', to,
      'actor', 'policy', 'note', note)
    settled = settled + 1
  end
end
return settled
