--[[
  release_dead_letter_claims: claimed by this holder -> unclaimed, for the given dead letters
  (acted on, or not due yet). Claims held by another holder are left alone.

  KEYS[1]  claims           ZSET dead letter id -> claim expiry (ms)
  KEYS[2]  claimers         HASH dead letter id -> holder

  ARGV[1]  holder           the redriver's id
  ARGV[2..] dead_letter_id

  Returns: how many claims were released.
  Events:  none
]]

local released = 0
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[1] then
    redis.call('ZREM', KEYS[1], ARGV[i])
    redis.call('HDEL', KEYS[2], ARGV[i])
    released = released + 1
  end
end
return released
