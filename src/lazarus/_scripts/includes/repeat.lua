-- Repeatable jobs: a schedule is the HASH '<prefix>:{<queue>}:repeat:<key>' (name, data, opts,
-- priority, atm: the template of its jobs; every | pattern and tz; limit, endDate; count: the
-- occurrences added; next: when the pending one is due, ms; overlap: 'skip' or ''; jobIds:
-- 'uuid7' or ''; run: the id of the last occurrence that ran; skipped: the last one skipped),
-- indexed by the ZSET '<prefix>:{<queue>}:repeat' (member key, score next). Its occurrence due
-- at t has one id, so however many producers race, each occurrence is added once.

-- occurrence_id(schedule, key, at): the job id of the occurrence of schedule `key` due at `at`:
-- 'repeat:<key>:<at>', or for a schedule whose jobIds is 'uuid7' a UUIDv7 (RFC 9562) whose time
-- is `at` and whose other bits are those of the SHA-1 of '<key>:<at>'.
local function occurrence_id(schedule, key, at)
  if redis.call('HGET', schedule, 'jobIds') ~= 'uuid7' then
    return 'repeat:' .. key .. ':' .. at
  end
  at = tonumber(at)
  local ms, h = string.format('%012x', at), redis.sha1hex(key .. ':' .. string.format('%d', at))
  local variant = tonumber(string.sub(h, 19, 19), 16) % 4 + 1  -- the variant bits: 10
  return string.sub(ms, 1, 8) .. '-' .. string.sub(ms, 9, 12) .. '-7' .. string.sub(h, 1, 3)
    .. '-' .. string.sub('89ab', variant, variant) .. string.sub(h, 4, 6) .. '-'
    .. string.sub(h, 7, 18)
end

-- add_occurrence(q, schedule, key, at, now, maxlen): add the job of the occurrence of `key` due
-- at `at` (ms) from the template in the schedule hash, delayed until then, unless it exists.
-- Returns its id.
local function add_occurrence(q, schedule, key, at, now, maxlen)
  local id = occurrence_id(schedule, key, at)
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
