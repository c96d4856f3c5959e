-- @include store_batch
-- The fields of a dead letter the replay scripts read (replay_read), in this order.
local REPLAY_FIELDS = {'dlq:sourceQueue', 'name', 'data', 'dlq:originalOpts', 'dlq:priority',
  'dlq:delay', 'dlq:atm', 'dlq:replayCount', 'dlq:status', 'dlq:replayJob', 'dlq:errorType',
  'dlq:reason', 'dlq:timeline', 'dlq:lastReplayedAt'}

-- replay_read(dl_key): the REPLAY_FIELDS of dead letter hash dl_key.
local function replay_read(dl_key)
  return redis.call('HMGET', dl_key, unpack(REPLAY_FIELDS))
end

-- replayed_since(f, since): whether the dead letter whose replay_read fields are `f` was
-- replayed at or after `since` (ms; nil: never true). A bulk replay passes the moment it
-- began: what it, or a run of it stopped half-way, or anyone else replayed since then is
-- left alone, even back in a replayable status (its replay failed meanwhile).
local function replayed_since(f, since)
  return since ~= nil and (tonumber(f[14]) or 0) >= since
end

-- replay_mark(batch, dl_key, dl_id, new_id, f, score, a, now, actor, note, rule, since):
-- mark dead letter dl_id (hash dl_key, `f` its replay_read fields, `score` its arrival score)
-- processing in `batch` (includes/store_batch.lua: the caller flushes it), waiting for job
-- new_id in queue ARGV[3], with the changed payload ARGV[a + 5] when one was given (the old
-- one kept in the timeline). Its dlq:lastReplayedAt is `now`, but never before a bulk
-- replay's `since` (nil for none): a process whose clock is behind the one that began the run
-- still marks what it replays as replayed since, so that no resume of the run replays it
-- again (replayed_since). Returns the payload the new job carries and the former status.
-- Shared by replay_dead_letters (one slot) and replay_out (across cluster slots), whose ARGV
-- layouts agree on these places.
local function replay_mark(batch, dl_key, dl_id, new_id, f, score, a, now, actor, note, rule,
                           since)
  local data = ARGV[a + 5] ~= '' and ARGV[a + 5] or f[3] or 'null'
  local details = {'job', cjson.encode(new_id), 'queue', store_json(ARGV[3])}
  if rule ~= '' then details[#details + 1] = 'rule'; details[#details + 1] = store_json(rule) end
  local fields = {'dlq:replayJob', new_id, 'dlq:replayQueue', ARGV[3],
    'dlq:lastReplayedAt', int_text(since and math.max(now, since) or now),
    'dlq:replayedBy', actor, 'dlq:replayRule', rule}
  if ARGV[a + 5] ~= '' then
    details[#details + 1] = 'replacedData'
    details[#details + 1] = cjson.encode(f[3] or 'null')
    fields[#fields + 1] = 'data'
    fields[#fields + 1] = data
  end
  local values = {f[1], f[2] or '', f[11] or '', f[12] or '', f[9] or 'pending'}
  local from = store_batch_set_status(batch, dl_id, dl_key, values, score, 'processing', now,
    {actor, note, details}, f[13], fields)
  return data, from
end
