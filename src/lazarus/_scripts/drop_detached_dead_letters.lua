--[[
  drop_detached_dead_letters: detached -> [*]: deletes the oldest dead letters of a detached
  key (detach_dead_letters), their hashes and logs, until the call's time budget or `most` is
  reached; the key leaves dl:p once empty.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3]  dlq_meta         holds the 'count:purged' counter
  KEYS[4]  detached         the detached key (dl:p:<token>:<status>)
  KEYS[5]  job_prefix       the dead letter queue's job prefix (ids are appended)

  ARGV[1]  maxlen
  ARGV[2]  budget_us        the call's time budget, microseconds
  ARGV[3]  most             the most dead letters this call deletes
  ARGV[4]  now
  ARGV[5]  yield            1: do nothing while Redis frees values in the background (its
                            lazyfree_pending_objects), 0: go on regardless

  Returns: {deleted, left, yielded}: left is how many the detached key still holds; yielded is
           1 when the call did nothing because Redis was freeing values in the background
           (the detach's unlinked indexes, for one): the caller waits a little and calls
           again. Deleting meanwhile would make both threads free memory at once, and on a
           busy machine stall Redis's commands for tens of milliseconds.
  Events:  purged (count, jobIds: the first 100 ids, comma-separated) when any were deleted
  Outbox:  purged, per dead letter deleted (with its fields)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include outbox
-- @include job_logs

local dl, detached, job_prefix = KEYS[1], KEYS[4], KEYS[5]
local most, now = tonumber(ARGV[3]), ARGV[4]
if ARGV[5] == '1' then
  local pending = string.match(redis.call('INFO', 'memory'), 'lazyfree_pending_objects:(%d+)')
  if tonumber(pending or 0) > 0 then return {0, redis.call('ZCARD', detached), 1} end
end
local t = redis.call('TIME')
local stop = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[2])
local count, ids = 0, {}
-- Each round deletes up to 100 dead letters, a fraction of the budget however large they are
-- (UNLINK frees a large hash or logs list in the background), and copies into the outbox.
while count < most do
  local popped = redis.call('ZPOPMIN', detached, math.min(100, most - count))
  if #popped == 0 then break end
  local keys = {}
  for i = 1, #popped, 2 do
    local id = popped[i]
    local key = job_prefix .. id
    outbox_append(dl, 'purged', id, now, 'purged', key)
    keys[#keys + 1] = key
    keys[#keys + 1] = logs_key(key)
    if #ids < 100 then ids[#ids + 1] = id end
  end
  redis.call('UNLINK', unpack(keys))
  count = count + #popped / 2
  t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop then break end
end
local left = redis.call('ZCARD', detached)
if left == 0 then redis.call('SREM', dl .. 'p', detached) end
if count > 0 then
  redis.call('HINCRBY', KEYS[3], 'count:purged', count)
  emit(KEYS[2], ARGV[1], 'purged', 'count', count, 'jobIds', table.concat(ids, ','))
end
return {count, left, 0}
