--[[
  pause_queue: pause or resume a queue. A paused queue keeps accepting jobs; workers claim
  none until it is resumed. Jobs already active finish.

  KEYS[1]  meta
  KEYS[2]  marker
  KEYS[3]  events

  ARGV[1]  paused           1 to pause, 0 to resume
  ARGV[2]  maxlen

  Returns: 1 when the state changed, 0 when it already was as asked.
  Events:  paused | resumed
]]
-- @include events

if ARGV[1] == '1' then
  if redis.call('HSETNX', KEYS[1], 'paused', 1) == 0 then return 0 end
  emit(KEYS[3], ARGV[2], 'paused')
  return 1
end
if redis.call('HDEL', KEYS[1], 'paused') == 0 then return 0 end
redis.call('ZADD', KEYS[2], 0, '0')
emit(KEYS[3], ARGV[2], 'resumed')
return 1
