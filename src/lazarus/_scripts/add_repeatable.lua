--[[
  add_repeatable: [*] -> schedule, and its first occurrence [*] -> delayed | waiting. A
  schedule that exists keeps its times and pending occurrence; only its job template (name,
  data, options) is updated. A schedule whose pending occurrence is gone gets a new one, due
  at `first` (within its limit and end date).

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
  KEYS[11] repeat           the index of the queue's schedules
  KEYS[12] schedule         the hash of this schedule

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  key              the schedule's key
  ARGV[4]  name
  ARGV[5]  data             JSON text
  ARGV[6]  opts             JSON text
  ARGV[7]  priority
  ARGV[8]  attempts
  ARGV[9]  every            ms, or '' for a cron schedule
  ARGV[10] pattern          cron expression, or ''
  ARGV[11] tz               IANA time zone of the pattern, or ''
  ARGV[12] limit            most occurrences, or ''
  ARGV[13] end_date         ms after which no occurrence is due, or ''
  ARGV[14] first            when the first occurrence is due (ms)
  ARGV[15] overlap          'skip': an occurrence due while the last one that ran has not
                            ended is skipped (repeat_job.lua); '' runs it
  ARGV[16] job_ids          'uuid7': occurrences are named by UUIDv7s, '' by
                            'repeat:<key>:<due>' (includes/repeat.lua)

  Returns: {1, next, job id} for a new schedule, {0, next, job id} for one that existed: the
           pending occurrence's due time and job id.
  Events:  delayed | waiting (jobId) for a new schedule's first occurrence
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include repeat

local q = queue_keys(1)
local key, schedule = ARGV[3], KEYS[12]
local template = {'name', ARGV[4], 'data', ARGV[5], 'opts', ARGV[6], 'priority', ARGV[7],
  'atm', ARGV[8]}
if redis.call('EXISTS', schedule) == 1 then
  redis.call('HSET', schedule, 'overlap', ARGV[15], unpack(template))
  local f = redis.call('HMGET', schedule, 'next', 'count', 'limit', 'endDate')
  local next, first = tonumber(f[1]), tonumber(ARGV[14])
  local limit, end_date = tonumber(f[3] or ''), tonumber(f[4] or '')
  -- Its pending occurrence gone (removed, cleaned, or run and dropped while the schedule
  -- could not advance), the schedule would wait for it for ever: it goes on from `first`.
  if redis.call('EXISTS', q.job_prefix .. occurrence_id(schedule, key, next)) == 0
      and (not limit or (tonumber(f[2]) or 0) < limit)
      and (not end_date or first <= end_date) then
    redis.call('HSET', schedule, 'next', first)
    redis.call('ZADD', KEYS[11], first, key)
    return {0, first, add_occurrence(q, schedule, key, first, tonumber(ARGV[1]), ARGV[2])}
  end
  return {0, next, occurrence_id(schedule, key, next)}
end
local first = tonumber(ARGV[14])
redis.call('HSET', schedule, unpack(template))
redis.call('HSET', schedule, 'every', ARGV[9], 'pattern', ARGV[10], 'tz', ARGV[11],
  'limit', ARGV[12], 'endDate', ARGV[13], 'count', 0, 'next', first, 'overlap', ARGV[15],
  'jobIds', ARGV[16])
redis.call('ZADD', KEYS[11], first, key)
return {1, first, add_occurrence(q, schedule, key, first, tonumber(ARGV[1]), ARGV[2])}
