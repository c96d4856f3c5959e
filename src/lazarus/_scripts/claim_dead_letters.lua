--[[
  claim_dead_letters: pending dead letter -> claimed by one redriver until the claim expires,
  so that redrivers running at once never act on the same dead letter; a claim held by a
  redriver that died expires and the dead letter can be claimed again. Reads each claimed dead
  letter's fields at the moment of the claim, for the redriver to decide on. Also drops up to
  100 expired claims, so the claim keys stay small.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  claims           ZSET dead letter id -> claim expiry (ms)
  KEYS[3]  claimers         HASH dead letter id -> holder
  KEYS[4]  job_prefix       the dead letter queue's job prefix (ids are appended)

  ARGV[1]  now
  ARGV[2]  holder           the redriver's id
  ARGV[3]  claim_ms         how long the claim lasts
  ARGV[4..] dead_letter_id  at most a few hundred per call

  Returns: one entry per id: 0 when not claimed (not pending, not in the store, or claimed by
           another holder), else {source queue, name, error type, reason, failed reason,
           dead-lettered at, status changed at, replay count}. Claiming again what the holder
           holds renews the claim (a call sent twice answers the same).
  Events:  none
]]
-- @include store

local dl, claims, claimers, job_prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local now, holder, until_ms = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[1]) + tonumber(ARGV[3])

local expired = redis.call('ZRANGEBYSCORE', claims, '-inf', now, 'LIMIT', 0, 100)
if #expired > 0 then
  redis.call('ZREM', claims, unpack(expired))
  redis.call('HDEL', claimers, unpack(expired))
end

local results = {}
for i = 4, #ARGV do
  local id = ARGV[i]
  local key = job_prefix .. id
  local result = 0
  local values = store_values(key)
  local held = tonumber(redis.call('ZSCORE', claims, id))
  local mine = held and redis.call('HGET', claimers, id) == holder
  if values and values[5] == 'pending' and redis.call('ZSCORE', dl .. 'i:s:pending', id)
      and (not held or held <= now or mine) then
    redis.call('ZADD', claims, until_ms, id)
    redis.call('HSET', claimers, id, holder)
    local f = redis.call('HMGET', key, 'dlq:failedReason', 'dlq:deadLetteredAt',
      'dlq:statusAt', 'dlq:replayCount')
    result = {values[1], values[2], values[3], values[4], f[1] or '', f[2] or '0',
      f[3] or '', f[4] or '0'}
  end
  results[#results + 1] = result
end
return results
