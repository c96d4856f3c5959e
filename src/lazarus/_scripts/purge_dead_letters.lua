--[[
  purge_dead_letters: dead letter -> [*] for the given dead letters.

  KEYS[1]  dlq_wait
  KEYS[2]  dlq_events
  KEYS[3]  dlq_meta         holds the 'count:purged' counter
  KEYS[4..] dead_letter     the hash of each dead letter, in the order of ARGV[3..]

  ARGV[1]  maxlen
  ARGV[2]  direction        1 to look for the ids from the newest end, -1 from the oldest
  ARGV[3..] dead_letter_id

  Returns: one entry per dead letter: 1 purged, -1 JOB_NOT_FOUND (gone already),
           -4 NOT_A_DEAD_LETTER (left untouched), -6 JOB_STATE (not waiting: a worker holds it).
  Events:  purged (count, jobIds: the first 100 ids, comma-separated) when any were purged
]]
-- @include events

local results, purged = {}, {}
local direction = tonumber(ARGV[2])
for i = 4, #KEYS do
  local id = ARGV[i - 1]
  local result
  if redis.call('HEXISTS', KEYS[i], 'dlq:sourceQueue') == 0 then
    result = (redis.call('EXISTS', KEYS[i]) == 1) and -4 or -1
  elseif redis.call('LREM', KEYS[1], direction, id) == 0 then
    result = -6
  else
    redis.call('DEL', KEYS[i])
    if #purged < 100 then purged[#purged + 1] = id end
    result = 1
  end
  results[#results + 1] = result
end
local count = 0
for _, r in ipairs(results) do if r == 1 then count = count + 1 end end
if count > 0 then
  redis.call('HINCRBY', KEYS[3], 'count:purged', count)
  emit(KEYS[2], ARGV[1], 'purged', 'count', count, 'jobIds', table.concat(purged, ','))
end
return results
