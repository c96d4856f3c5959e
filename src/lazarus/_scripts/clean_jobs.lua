--[[
  clean_jobs: <state> -> [*] for jobs older than a cutoff, at most `limit` per call.
  completed and failed are aged by finish time; waiting, prioritized and delayed by the job's
  timestamp. waiting is read from its oldest end and stops at the first job newer than the
  cutoff; on a dead letter queue it then takes the dead letters of its store that were
  dead-lettered at or before the cutoff, oldest first within each status.

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
  KEYS[11] completed
  KEYS[12] failed

  ARGV[1]  state            completed | failed | waiting | prioritized | delayed
  ARGV[2]  cutoff           jobs at or before this time (ms) are removed
  ARGV[3]  limit
  ARGV[4]  maxlen

  Returns: the ids removed.
  Events:  cleaned (count, state) when any were removed
  Outbox:  cleaned, per dead letter removed (with its fields)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include queue_keys
-- @include store
-- @include dedup
-- @include job_logs

local q = queue_keys(1)
local state = ARGV[1]
local cutoff = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local removed = {}
local function drop(id)
  dedup_release(q.job_prefix, id, false)
  drop_job(q.job_prefix .. id)
  removed[#removed + 1] = id
end
local function older(id)
  local ts = tonumber(redis.call('HGET', q.job_prefix .. id, 'timestamp') or '0') or 0
  return ts <= cutoff
end
if state == 'completed' or state == 'failed' then
  local set = state == 'completed' and KEYS[11] or KEYS[12]
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', set, '-inf', cutoff, 'LIMIT', 0, limit)) do
    redis.call('ZREM', set, id)
    drop(id)
  end
elseif state == 'waiting' then
  while #removed < limit do
    local id = redis.call('LINDEX', q.wait, -1)
    if not id or not older(id) then break end
    redis.call('RPOP', q.wait)
    drop(id)
  end
  for _, index in ipairs(store_statuses(q.dl)) do
    if #removed >= limit then break end
    local old = redis.call('ZRANGE', index, '-inf', cutoff * 1000 + 999, 'BYSCORE',
      'LIMIT', 0, limit - #removed)
    for _, id in ipairs(old) do
      store_remove(q.dl, id, q.job_prefix .. id, 'cleaned', '')
      drop(id)
    end
  end
else
  local set = state == 'delayed' and q.delayed or q.prioritized
  for _, id in ipairs(redis.call('ZRANGE', set, 0, limit * 10)) do
    if #removed >= limit then break end
    if older(id) then
      redis.call('ZREM', set, id)
      drop(id)
    end
  end
end
if #removed > 0 then
  emit(q.events, ARGV[4], 'cleaned', 'count', #removed, 'state', state)
end
return removed
