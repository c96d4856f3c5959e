--[[
  prune_dead_letters: dead letter -> [*] (delete) or -> archived (archive), by a retention
  policy, oldest first, at most `budget` dead letters per call. First by age, per status: the
  dead letters of a status that arrived before its cutoff; then by count: while the dead
  letters not archived outnumber max_count, the oldest of them. Reads only the status indexes
  (their arrival order) and the pruned entries: bounded work whatever the store's size.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3]  dlq_meta         holds the 'count:pruned:deleted' and 'count:pruned:archived' counters
  KEYS[4]  job_prefix       the dead letter queue's job prefix (ids are appended)

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  budget           the most dead letters this call prunes
  ARGV[4]  max_count        '' for no limit by count
  ARGV[5]  count_action     delete | archive: what the count limit does
  ARGV[6..] triples: status, cutoff (a store score: dead letters below it are expired), action
           (delete | archive); an archived dead letter is always deleted

  Returns: {deleted, archived, more}: more is 1 when the budget ran out before the policy was
           met (call again).
  Events:  pruned (count, deleted, archived, jobIds: the first 100 ids, comma-separated) when
           any were pruned; statusChanged (jobId, from, to, actor, note) for each archived
  Outbox:  pruned (with its fields) per dead letter deleted, archived per dead letter archived
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include store
-- @include job_logs

local dl, events, meta, job_prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, maxlen = tonumber(ARGV[1]), ARGV[2]
local left = tonumber(ARGV[3])
local deleted, archived, ids = 0, 0, {}

local function prune(id, status, action, note)
  local key = job_prefix .. id
  if status == 'archived' or action == 'delete' then
    if not store_remove(dl, id, key, 'pruned', now) then return end
    redis.call('UNLINK', key, logs_key(key))
    deleted = deleted + 1
  else
    local from = store_set_status(dl, id, key, 'archived', now, 'policy', note)
    if not from then return end
    emit(events, maxlen, 'statusChanged', 'jobId', id, 'from', from, 'to', 'archived',
      'actor', 'policy', 'note', note)
    archived = archived + 1
  end
  left = left - 1
  if #ids < 100 then ids[#ids + 1] = id end
end

-- By age: each status's expired dead letters are the head of its index.
for i = 6, #ARGV, 3 do
  local status, cutoff, action = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if left > 0 and cutoff ~= '' then
    local expired = redis.call('ZRANGEBYSCORE', dl .. 'i:s:' .. status, '-inf', '(' .. cutoff,
      'LIMIT', 0, left)
    for _, id in ipairs(expired) do prune(id, status, action, 'retention: past its age') end
  end
end

-- By count: the oldest of the dead letters not archived, merged across their status indexes.
if ARGV[4] ~= '' and left > 0 then
  local heads, total = {}, 0
  for _, status in ipairs(redis.call('ZRANGE', dl .. 'v:s', 0, -1)) do
    if status ~= 'archived' then
      heads[#heads + 1] = status
      total = total + redis.call('ZCARD', dl .. 'i:s:' .. status)
    end
  end
  local excess = math.min(total - tonumber(ARGV[4]), left)
  if excess > 0 then
    local oldest = {}
    for _, status in ipairs(heads) do
      local head = redis.call('ZRANGE', dl .. 'i:s:' .. status, 0, excess - 1, 'WITHSCORES')
      for j = 1, #head, 2 do
        oldest[#oldest + 1] = {head[j], tonumber(head[j + 1]), status}
      end
    end
    table.sort(oldest, function(a, b) return a[2] < b[2] end)
    for j = 1, excess do
      prune(oldest[j][1], oldest[j][3], ARGV[5], 'retention: over the count limit')
    end
  end
end

local count = deleted + archived
if count > 0 then
  redis.call('HINCRBY', meta, 'count:pruned:deleted', deleted)
  redis.call('HINCRBY', meta, 'count:pruned:archived', archived)
  emit(events, maxlen, 'pruned', 'count', count, 'deleted', deleted, 'archived', archived,
    'jobIds', table.concat(ids, ','))
end
return {deleted, archived, left <= 0 and 1 or 0}
