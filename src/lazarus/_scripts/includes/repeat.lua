-- Repeatable jobs: a schedule is the HASH '<prefix>:{<queue>}:repeat:<key>' (name, data, opts,
-- priority, atm: the template of its jobs; every | pattern and tz; limit, endDate; count: the
-- occurrences added; next: when the pending one is due, ms), indexed by the ZSET
-- '<prefix>:{<queue>}:repeat' (member key, score next). Its occurrence due at t is the job
-- 'repeat:<key>:<t>': one id per occurrence, so however many producers race, each occurrence
-- is added once.

-- occurrence_id(key, at): the job id of the occurrence of schedule `key` due at `at`.
local function occurrence_id(key, at)
  return 'repeat:' .. key .. ':' .. at
end

-- add_occurrence(q, schedule, key, at, now, maxlen): add the job of the occurrence of `key` due
-- at `at` (ms) from the template in the schedule hash, delayed until then, unless it exists.
-- Returns its id.
local function add_occurrence(q, schedule, key, at, now, maxlen)
  local id = occurrence_id(key, at)
  local job_key = q.job_prefix .. id
  if redis.call('EXISTS', job_key) == 1 then return id end
  local f = redis.call('HMGET', schedule, 'name', 'data', 'opts', 'priority', 'atm')
  local priority = tonumber(f[4]) or 0
  local delay = math.max(at - now, 0)
  redis.call('HSET', job_key, 'name', f[1], 'data', f[2], 'opts', f[3], 'timestamp', now,
    'delay', delay, 'priority', priority, 'atm', f[5] or 1, 'attemptsMade', 0, 'rpk', key)
  redis.call('HINCRBY', schedule, 'count', 1)
  enqueue(q, id, priority, delay, now, maxlen)
  return id
end
