--[[
  replay_in: moving -> waiting | prioritized | delayed, the second step of a replay into a
  queue in another Redis Cluster slot (docs/redis-cluster.md): the new job recorded by
  replay_out enters its queue with a copy of the dead letter's logs, as replay_dead_letters
  would have added it on one slot. Idempotent: the move is remembered in the queue's own slot
  (KEYS[12], for a week), and a move seen before changes nothing.

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
  KEYS[11] job              the new job's hash
  KEYS[12] arrived          ZSET of the moves added, score = when (ms)

  ARGV[1]  move             the move, as JSON (replay_out)
  ARGV[2]  now
  ARGV[3]  maxlen

  Returns: the state the new job entered (its state now, when an earlier call added it), or
           -5 JOB_EXISTS when another job holds the new job's id (nothing written).
  Events:  waiting | delayed (jobId)
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include moves_in

local q = queue_keys(1)
local mv = cjson.decode(ARGV[1])
local now = tonumber(ARGV[2])
local f = mv['fields']
local id = mv['id']
if move_taken_in(KEYS[12], mv['move']) then
  if redis.call('ZSCORE', q.delayed, id) then return 'delayed' end
  if redis.call('ZSCORE', q.prioritized, id) then return 'prioritized' end
  return 'waiting'
end
-- The new job's id is another job's (an id the caller chose): nothing is added, and the
-- caller sends the dead letter back to what it was.
if redis.call('EXISTS', KEYS[11]) == 1 then return -5 end
remember_move(KEYS[12], mv['move'], now)
local priority, delay = tonumber(f['priority']) or 0, tonumber(f['delay']) or 0
redis.call('HSET', KEYS[11], 'name', f['name'], 'data', f['data'], 'opts', f['opts'],
  'timestamp', int_text(now), 'delay', int_text(delay), 'priority', int_text(priority),
  'atm', f['atm'], 'attemptsMade', '0',
  'rc', f['rc'], 'replayOf', f['replayOf'], 'replayDlq', f['replayDlq'])
local lines = mv['logs']
if #lines > 0 then
  local logs = string.sub(q.job_prefix, 1, -5) .. 'logs:' .. id
  for i = 1, #lines, 1000 do
    redis.call('RPUSH', logs, unpack(lines, i, math.min(i + 999, #lines)))
  end
end
return enqueue(q, id, priority, delay, now, ARGV[3])
