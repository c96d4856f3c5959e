-- @include store
-- replay_mark(dl, dl_key, dl_id, new_id, f, a, now, actor, note, rule): mark dead letter
-- dl_id (hash dl_key, fields f as the replay scripts read them) processing, waiting for job
-- new_id in queue ARGV[3], with the changed payload ARGV[a + 5] when one was given (the old
-- one kept in the timeline). Returns the payload the new job carries and the former status.
-- Shared by replay_dead_letters (one slot) and replay_out (across cluster slots), whose ARGV
-- layouts agree on these places.
local function replay_mark(dl, dl_key, dl_id, new_id, f, a, now, actor, note, rule)
  local data = ARGV[a + 5] ~= '' and ARGV[a + 5] or f[3] or 'null'
  local details = {'job', cjson.encode(new_id), 'queue', cjson.encode(ARGV[3])}
  if rule ~= '' then details[#details + 1] = 'rule'; details[#details + 1] = cjson.encode(rule) end
  if ARGV[a + 5] ~= '' then
    details[#details + 1] = 'replacedData'
    details[#details + 1] = cjson.encode(f[3] or 'null')
    redis.call('HSET', dl_key, 'data', data)
  end
  local from = store_set_status(dl, dl_id, dl_key, 'processing', now, actor, note, details)
  redis.call('HSET', dl_key, 'dlq:replayJob', new_id, 'dlq:replayQueue', ARGV[3],
    'dlq:lastReplayedAt', now, 'dlq:replayedBy', actor, 'dlq:replayRule', rule)
  return data, from
end
