-- The moves a queue took in from another slot (its 'moves:in' ZSET, score = when, ms), kept
-- MOVES_KEEP_MS so that the second step of a move sent again adds nothing. Each arrival
-- forgets at most MOVES_FORGET_AT_MOST of those older than that, so no call does more work
-- however many moves a burst a week ago left; arrivals outpace what they forget.
local MOVES_KEEP_MS = 7 * 24 * 3600 * 1000
local MOVES_FORGET_AT_MOST = 100

-- move_taken_in(key, name): whether the move `name` was taken in already.
local function move_taken_in(key, name)
  return redis.call('ZSCORE', key, name) ~= false
end

-- remember_move(key, name, now): remember the move `name`, taken in now.
local function remember_move(key, name, now)
  redis.call('ZADD', key, now, name)
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', now - MOVES_KEEP_MS, 'LIMIT', 0,
    MOVES_FORGET_AT_MOST)
  if #old > 0 then redis.call('ZREM', key, unpack(old)) end
end
