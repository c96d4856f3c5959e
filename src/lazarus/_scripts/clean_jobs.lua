--[[
  clean_jobs: <state> -> [*] for jobs older than a cutoff, at most `limit`, and for as long
  as the call's time budget lasts (includes/budget.lua): the caller calls again to go on.
  completed and failed are aged by finish time; waiting, prioritized and delayed by the job's
  timestamp. waiting is read from its oldest end and stops at the first job newer than the
  cutoff; on a dead letter queue it then takes the dead letters of its store that were
  dead-lettered at or before the cutoff, oldest first within each status (unless ARGV[8]
  says not to: a drain).

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
  ARGV[5]  budget_us        the call's time budget, microseconds
  ARGV[6]  offset           prioritized | delayed: the rank to read on from (the jobs before it
                            were read and kept by the calls before); else 0
  ARGV[7]  scan             prioritized | delayed: how many more jobs may be read; else 0
  ARGV[8]  dead_letters     waiting: '1' to take the store's dead letters after the wait list,
                            '0' to leave them

  Returns: {ids removed, resume, read}: resume is the offset to call again with when the
           budget ran out before the call was done, else -1; read is how many prioritized or
           delayed jobs the call read.
  Events:  cleaned (count, state) when any were removed
  Outbox:  cleaned, per dead letter removed (with its fields)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include queue_keys
-- @include store
-- @include dedup
-- @include job_logs
-- @include budget
-- @include enqueue

local q = queue_keys(1)
local state = ARGV[1]
local cutoff = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
local removed = {}
local resume = -1
budget_start(ARGV[5])
-- drop(id): remove job `id`; whether the call must stop there (the budget ran out).
local function drop(id)
  dedup_release(q.job_prefix, id, false)
  drop_job(q, id)
  removed[#removed + 1] = id
  return #removed < limit and budget_spent()
end
local function older(id)
  local ts = tonumber(redis.call('HGET', q.job_prefix .. id, 'timestamp') or '0') or 0
  return ts <= cutoff
end
local read = 0
if state == 'completed' or state == 'failed' then
  local set = state == 'completed' and KEYS[11] or KEYS[12]
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', set, '-inf', cutoff, 'LIMIT', 0, limit)) do
    redis.call('ZREM', set, id)
    if drop(id) then
      resume = 0
      break
    end
  end
elseif state == 'waiting' then
  while #removed < limit and resume < 0 do
    local id = redis.call('LINDEX', q.wait, -1)
    if id == '' then
      redis.call('RPOP', q.wait)
      wait_skip_hole(q, id)
    else
      if not id or not older(id) then break end
      redis.call('RPOP', q.wait)
      if drop(id) then resume = 0 end
    end
  end
  for _, index in ipairs(ARGV[8] == '1' and store_statuses(q.dl) or {}) do
    if #removed >= limit or resume >= 0 then break end
    local old = redis.call('ZRANGE', index, '-inf', cutoff * 1000 + 999, 'BYSCORE',
      'LIMIT', 0, limit - #removed)
    for _, id in ipairs(old) do
      store_remove(q.dl, id, q.job_prefix .. id, 'cleaned', '')
      if drop(id) then
        resume = 0
        break
      end
    end
  end
else
  -- Read in pages, from where the calls before stopped: a job kept moves the offset on.
  local set = state == 'delayed' and q.delayed or q.prioritized
  local offset = tonumber(ARGV[6])
  local scan = tonumber(ARGV[7])
  local want = math.min(scan, 1000)
  local page = redis.call('ZRANGE', set, offset, offset + want - 1)
  for i, id in ipairs(page) do
    read = i
    local stop
    if older(id) then
      redis.call('ZREM', set, id)
      stop = drop(id)
    else
      offset = offset + 1
      stop = budget_spent()
    end
    if #removed >= limit then break end
    if stop then
      resume = offset
      break
    end
  end
  -- A whole page read, and more may be: the next call reads on.
  if resume < 0 and #removed < limit and read == want and scan > want then resume = offset end
end
if #removed > 0 then
  emit(q.events, ARGV[4], 'cleaned', 'count', #removed, 'state', state)
end
return {removed, resume, read}
