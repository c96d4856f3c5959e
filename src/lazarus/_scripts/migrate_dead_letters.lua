--[[
  migrate_dead_letters: move the dead letters that a dead letter queue written by lazarus 0.1
  keeps in its waiting list into its store, from the oldest end, at most `count` entries per
  call. Ordinary jobs found there go back to the newest end, in their order; ids without a
  hash are dropped. Dead letters already in the store are left there.

  KEYS[1]  wait
  KEYS[2]  prioritized
  KEYS[3]  pc
  KEYS[4]  delayed
  KEYS[5]  active
  KEYS[6]  leases
  KEYS[7]  marker
  KEYS[8]  meta
  KEYS[9]  events
  KEYS[10] job_prefix

  ARGV[1]  count            entries of the waiting list to look at, at most

  Returns: {looked_at, moved}
  Events:  none
  Outbox:  dead-lettered, per dead letter moved into the store
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include queue_keys
-- @include store
-- @include enqueue

local q = queue_keys(1)
local moved, looked = 0, 0
for _ = 1, tonumber(ARGV[1]) do
  local id = redis.call('RPOP', q.wait)
  if not id then break end
  looked = looked + 1
  -- A hole is the place of a job removed from deep inside the list (includes/enqueue.lua).
  if not wait_skip_hole(q, id) then
    local key = q.job_prefix .. id
    local values, at, origin = store_values(key)
    if values then
      if not redis.call('ZSCORE', q.dl .. 'i:s:' .. values[5], id) then
        redis.call('HSET', key, 'dlq:status', values[5])
        redis.call('HDEL', key, 'opts', 'priority', 'delay', 'atm', 'attemptsMade', 'timestamp')
        for _, field in ipairs({'dlq:priority', 'dlq:delay', 'dlq:replayCount'}) do
          if redis.call('HGET', key, field) == '0' then redis.call('HDEL', key, field) end
        end
        store_add(q.dl, id, values, at, origin)
        moved = moved + 1
      end
    elseif redis.call('EXISTS', key) == 1 then
      redis.call('LPUSH', q.wait, id)
    end
  end
end
if moved > 0 then redis.call('ZADD', q.marker, 0, '0') end
return {looked, moved}
