--[[
  settle_dead_letters: processing -> pending | resolved for dead letters whose replayed job
  will never report back: removed or cleaned before it finished (pending), completed by a
  worker that did not resolve it (resolved), or failed for good into its queue's failed set
  (pending). A dead letter whose job still runs, waits, or was replayed anew is untouched.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3..] dead_letter, job, completed, failed   quadruples: the dead letter's hash, its
           replayed job's hash and that job's queue's completed and failed sets

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3..] pairs: dead_letter_id, job_id (the replayed job the caller saw it wait for)

  Returns: the number of dead letters settled.
  Events:  statusChanged (jobId, from, to, actor, note) for each, actor policy
]]
-- @include events
-- @include store

local dl, now, maxlen = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local settled = 0
for i = 3, #KEYS, 4 do
  local a = 3 + (i - 3) / 4 * 2
  local rec_key, job_key, dl_id, job_id = KEYS[i], KEYS[i + 1], ARGV[a], ARGV[a + 1]
  local rec = redis.call('HMGET', rec_key, 'dlq:status', 'dlq:replayJob')
  if rec[1] == 'processing' and rec[2] == job_id then
    local to, note = nil, nil
    if redis.call('HGET', job_key, 'replayOf') ~= dl_id then
      to, note = 'pending', 'the replayed job was removed before it finished'
    elseif redis.call('ZSCORE', KEYS[i + 2], job_id) then
      to, note = 'resolved', 'the replayed job completed'
    elseif redis.call('ZSCORE', KEYS[i + 3], job_id) then
      to, note = 'pending', 'the replayed job failed without a dead letter queue'
    end
    if to then
      store_set_status(dl, dl_id, rec_key, to, now, 'policy', note, {'job', cjson.encode(job_id)})
      emit(KEYS[2], maxlen, 'statusChanged', 'jobId', dl_id, 'from', 'processing', 'to', to,
        'actor', 'policy', 'note', note)
      settled = settled + 1
    end
  end
end
return settled
