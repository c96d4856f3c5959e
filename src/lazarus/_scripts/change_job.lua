--[[
  change_job: a job's data, priority and delay (any of them, together) change where it is;
  the job keeps its state, except that a new priority moves a ready job between waiting and
  prioritized, and a new delay moves a delayed job's due time. Every change or none.

  - data: any state but a dead letter (replay it with a new payload instead).
  - priority: waiting or prioritized, placed again by the new priority (a job that comes into
    waiting goes in as a new one, at the head: it runs after the jobs that wait already;
    prioritized, after those of its priority); in any other state (delayed, active,
    completed, failed) only the job's priority changes, which the job keeps when it is next
    ready (its delay ends, it is retried). Not a dead letter.
  - delay: delayed only; the job becomes due `value` ms from now.

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
  KEYS[13] job

  ARGV[1]  id
  ARGV[2]  now
  ARGV[3]  maxlen
  ARGV[4]  data             its JSON text, '' to keep it
  ARGV[5]  priority         0 (none) .. 2^21, '' to keep it
  ARGV[6]  delay            ms >= 0, '' to keep it
  ARGV[7]  at               '' at first; then where the caller found the job in the wait list
                            (includes/enqueue.lua's wait_remove; a priority change only)

  Returns: the job's state after the change ('waiting', 'prioritized', 'delayed', 'active',
           'completed' or 'failed'; a job in none of the sets is in the wait list, as
           job_state.lua reads it: 'waiting'; a waiting or prioritized job of a paused
           queue: 'paused'), -1 JOB_NOT_FOUND, -6 JOB_STATE
           (a dead letter; a delay for a job that is not delayed: nothing written), or
           {-9, from, id} WAIT_SEARCH: nothing written; the job may be deep inside a long wait
           list: the caller looks for it there from index `from` and calls again with where
           it is.
  Events:  changed (jobId, fields: the fields changed, comma-separated: data,priority,delay);
           with a delay, then delayed (jobId, delay: the due time)
]]
-- @include events
-- @include queue_keys
-- @include enqueue

local q = queue_keys(1)
local id, now, maxlen = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local key = KEYS[13]
if redis.call('EXISTS', key) == 0 then return -1 end
if redis.call('HEXISTS', key, 'dlq:sourceQueue') == 1 then return -6 end
local change, fields = {}, {}
for i, field in ipairs({'data', 'priority', 'delay'}) do
  if ARGV[3 + i] ~= '' then
    change[field] = ARGV[3 + i]
    fields[#fields + 1] = field
  end
end

-- Where the job is; the wait list, the one that costs a search, is left for last (nil).
local state
if redis.call('ZSCORE', q.leases, id) then state = 'active'
elseif redis.call('ZSCORE', q.prioritized, id) then state = 'prioritized'
elseif redis.call('ZSCORE', q.delayed, id) then state = 'delayed'
elseif redis.call('ZSCORE', KEYS[11], id) then state = 'completed'
elseif redis.call('ZSCORE', KEYS[12], id) then state = 'failed'
end
if change.delay and state ~= 'delayed' then return -6 end

-- The priority first: the one change that may have to ask for a search, before any write.
local priority = tonumber(change.priority)
if priority then
  local function prioritize()
    local counter = redis.call('INCR', q.pc) % 4294967296
    redis.call('ZADD', q.prioritized, priority * 4294967296 + counter, id)
    enqueue_mark(q)
  end
  if state == 'prioritized' and priority > 0 then
    prioritize()
  elseif state == 'prioritized' then
    redis.call('ZREM', q.prioritized, id)
    redis.call('LPUSH', q.wait, id)
    enqueue_mark(q)
    state = 'waiting'
  elseif state == nil and priority > 0 then
    -- In none of the sets: in the wait list (job_state.lua), found there before a write.
    local removed, from = wait_remove(q, id, tonumber(ARGV[7]))
    if removed == nil then return {-9, from, id} end
    if removed then
      prioritize()
      state = 'prioritized'
    end
  end
  redis.call('HSET', key, 'priority', priority)
end
if change.data then redis.call('HSET', key, 'data', change.data) end
emit(q.events, maxlen, 'changed', 'jobId', id, 'fields', table.concat(fields, ','))
local delay = tonumber(change.delay)
if delay then
  redis.call('ZADD', q.delayed, now + delay, id)
  redis.call('HSET', key, 'delay', delay)
  enqueue_mark(q)  -- a worker asleep until the old due time wakes to read the new one
  emit(q.events, maxlen, 'delayed', 'jobId', id, 'delay', now + delay)
end
return state_told(q, state or 'waiting')
