--[[
  beat_worker: a worker's heartbeat. Forgets workers whose registration lapsed (at most
  PRUNE_AT_MOST a beat: the next beats take the rest), then registers (or renews) the beating
  worker. One call, so a worker that renews itself meanwhile is never taken for lapsed, and
  the beating worker, lapsed itself, comes back rather than going.

  KEYS[1]  workers          sorted set: worker name -> when its registration expires (ms)
  KEYS[2]  workers_info     hash: worker name -> its details (JSON)

  ARGV[1]  now              milliseconds
  ARGV[2]  name             the beating worker's name
  ARGV[3]  expires          when its registration expires (ms)
  ARGV[4]  details          its details (JSON)

  Returns: how many lapsed workers it forgot.
  Events:  none
]]

local PRUNE_AT_MOST = 1000
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, PRUNE_AT_MOST)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[1], unpack(lapsed))
  redis.call('HDEL', KEYS[2], unpack(lapsed))
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[4])
return #lapsed
