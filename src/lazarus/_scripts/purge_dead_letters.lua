--[[
  purge_dead_letters: dead letter -> [*] for the given dead letters: out of the store, hash
  and logs deleted.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3]  dlq_meta         holds the 'count:purged' counter
  KEYS[4..] dead_letter     the hash of each dead letter, in the order of ARGV[5..]

  ARGV[1]  maxlen
  ARGV[2]  statuses         the statuses a dead letter must be in to go, comma-separated
                            ('' for any): a bulk purge leaves one that left them meanwhile
  ARGV[3]  budget_us        the call's time budget, microseconds (includes/budget.lua)
  ARGV[4]  tally            the tally the dead letters purged are added to ('' for none:
                            includes/tally.lua)
  ARGV[5..] dead_letter_id

  Returns: one entry per dead letter handled, in order (fewer than given when the budget ran
           out: the caller sends the rest again): 1 purged, -1 JOB_NOT_FOUND (gone already),
           -4 NOT_A_DEAD_LETTER (left untouched), -6 JOB_STATE (not in the store: a worker on
           the dead letter queue holds it; or not in one of the statuses; untouched).
  Events:  purged (count, jobIds: the first 100 ids, comma-separated) when any were purged
  Outbox:  purged, per dead letter purged (with its fields)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include store_batch
-- @include budget
-- @include tally

local results, purged = {}, {}
local count = 0
local allowed = nil
if ARGV[2] ~= '' then
  allowed = {}
  for status in string.gmatch(ARGV[2], '[^,]+') do allowed[status] = true end
end
local batch = store_batch(KEYS[1])
-- held[status][id]: in the store, in that status; read for the next ids HELD_AHEAD at a time.
local HELD_AHEAD = 100
local held, held_to = {}, 3
budget_start(ARGV[3])
for i = 4, #KEYS do
  local id = ARGV[i + 1]
  local result
  local values, _, origin = nil, nil, nil
  if i > held_to then
    held_to = math.min(i + HELD_AHEAD - 1, #KEYS)
    held = store_held(KEYS[1], {unpack(ARGV, i + 1, held_to + 1)}, allowed)
  end
  if not store_seen(batch, id) then values, _, origin = store_values(KEYS[i]) end
  if store_seen(batch, id) then
    result = -1  -- purged earlier in this call
  elseif not values then
    result = (redis.call('EXISTS', KEYS[i]) == 1) and -4 or -1
  elseif not (held[values[5]] and held[values[5]][id])
      or not store_batch_remove(batch, id, KEYS[i], values, origin, 'purged', '') then
    result = -6
  else
    store_step(batch, id)
    if #purged < 100 then purged[#purged + 1] = id end
    count = count + 1
    result = 1
  end
  results[#results + 1] = result
  if budget_spent() then break end
end
store_flush(batch)
if count > 0 then
  redis.call('HINCRBY', KEYS[3], 'count:purged', count)
  tally_add(KEYS[1], ARGV[4], count)
  emit(KEYS[2], ARGV[1], 'purged', 'count', count, 'jobIds', table.concat(purged, ','))
end
return results
