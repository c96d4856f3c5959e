--[[
  clear_move: moving -> arrived, the third step of a move across Redis Cluster slots
  (docs/redis-cluster.md): once the target has the job, the move's entry is deleted from the
  source queue's moves hash, and with it the mark of its job in transit ('job:<job id>',
  includes/move_out.lua) while that mark still names this move. A job id can move again
  before an older move of it is cleared (a replay under the job's original id that failed
  again while a sweep had yet to clear the first move): the newer move's mark stays until
  that move arrives, or its dead letter would be settled as if its job were removed.

  KEYS[1]  moves            the source queue's moves hash

  ARGV[1]  move_id          the move's id (its dead letter's)
  ARGV[2]  job_id           the id of the job it moved

  Returns: 1 when this call deleted the entry, 0 when it was gone already.
  Events:  none
]]

local mark = 'job:' .. ARGV[2]
if redis.call('HGET', KEYS[1], mark) == ARGV[1] then redis.call('HDEL', KEYS[1], mark) end
return redis.call('HDEL', KEYS[1], ARGV[1])
