--[[
  detach_dead_letters: the whole store -> detached, for a purge of everything in it. When every
  dead letter of the store is in one of the given statuses, each status index is renamed to a
  detached key of this purge and every other index, value set, count and original-id entry is
  unlinked (Redis frees large values in the background). The dead letters that arrived after
  the given score (at most most_after of them) are then indexed again as they were, and leave
  the detached keys: the purge does not cover them. The store then holds those alone, at once;
  the detached dead letters' hashes and logs stay until drop_detached_dead_letters deletes them,
  in bounded calls. Renames, unlinks and the few arrivals indexed again: the work is the
  number of index keys, however many dead letters they hold.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  job_prefix       the dead letter queue's job prefix (ids are appended)

  ARGV[1]  statuses         the statuses the purge covers, comma-separated
  ARGV[2]  until            a store score: the purge covers dead letters that arrived by it
  ARGV[3]  token            names this purge's detached keys: dl:p:<token>:<status>
  ARGV[4]  most_keys        the most index keys one call may unlink
  ARGV[5]  most_after       the most dead letters arrived after `until` one call indexes again
  ARGV[6]  tally            the tally the dead letters detached are added to ('' for none:
                            includes/tally.lua)

  Returns: {count, key, key, ...}: how many dead letters were detached, and the detached keys
           (listed in dl:p until drained); {} when the store holds a dead letter in a status the
           purge does not cover, more index keys than most_keys or more than most_after
           arrivals after `until`: nothing changed (purge one by one).
  Events:  none (drop_detached_dead_letters emits 'purged' as it deletes).
  Outbox:  none (drop_detached_dead_letters appends 'purged' per dead letter it deletes).
]]
-- @include store
-- @include tally

local dl, job_prefix = KEYS[1], KEYS[2]
local newest_allowed, token = tonumber(ARGV[2]), ARGV[3]
local most_keys, most_after = tonumber(ARGV[4]), tonumber(ARGV[5])
local covered = {}
for status in string.gmatch(ARGV[1], '[^,]+') do covered[status] = true end

local statuses = redis.call('ZRANGE', dl .. 'v:s', 0, -1)
local keys, after = #statuses, {}
for _, status in ipairs(statuses) do
  if not covered[status] then return {} end
  local newer = redis.call('ZRANGE', dl .. 'i:s:' .. status, '(' .. ARGV[2], '+inf', 'BYSCORE',
    'LIMIT', 0, most_after + 1, 'WITHSCORES')
  for i = 1, #newer, 2 do after[#after + 1] = {newer[i], newer[i + 1], status} end
  if #after > most_after then return {} end
end
local codes = {'q', 'n', 'e', 'r'}
for _, code in ipairs(codes) do keys = keys + redis.call('ZCARD', dl .. 'v:' .. code) end
if keys > most_keys then return {} end

-- The arrivals after `until`, as they are, before their index entries go.
for _, entry in ipairs(after) do
  local values, _, origin = store_values(job_prefix .. entry[1])
  entry[4], entry[5] = values, origin
end

local detached = {}
for _, status in ipairs(statuses) do
  local index = dl .. 'i:s:' .. status
  if redis.call('EXISTS', index) == 1 then
    local key = dl .. 'p:' .. token .. ':' .. status
    redis.call('RENAME', index, key)
    redis.call('SADD', dl .. 'p', key)
    detached[#detached + 1] = key
  end
end
local dropped = {dl .. 'v:s', dl .. 'c', dl .. 'o'}
for _, code in ipairs(codes) do
  for _, value in ipairs(redis.call('ZRANGE', dl .. 'v:' .. code, 0, -1)) do
    dropped[#dropped + 1] = dl .. 'i:' .. code .. ':' .. value
  end
  dropped[#dropped + 1] = dl .. 'v:' .. code
end
for i = 1, #dropped, 1000 do redis.call('UNLINK', unpack(dropped, i, math.min(i + 999, #dropped))) end

for _, entry in ipairs(after) do
  redis.call('ZREM', dl .. 'p:' .. token .. ':' .. entry[3], entry[1])
  if entry[4] then store_index(dl, entry[1], entry[4], entry[2], entry[5]) end
end
-- The count and the keys that hold any dead letter once the arrivals after `until` are out.
local result = {0}
for _, key in ipairs(detached) do
  local left = redis.call('ZCARD', key)
  if left == 0 then
    redis.call('SREM', dl .. 'p', key)
  else
    result[1] = result[1] + left
    result[#result + 1] = key
  end
end
tally_add(dl, ARGV[6], result[1])
return result
