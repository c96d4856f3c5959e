--[[
  repeat_job: schedule -> its next occurrence [*] -> delayed | waiting, once the pending one
  was claimed; and, for a schedule with overlap 'skip', the claimed one active -> [*] when the
  last occurrence that ran has not ended (it is in the queue, neither completed nor failed):
  skipped, it never runs. A compare-and-set on the schedule's next due time: of any number of
  producers advancing the same occurrence, one does; the others change nothing. Only that
  first claim of an occurrence (when it falls due) is checked for overlap and becomes the
  schedule's `run`: a claim again (after a stall, a retry, a dead letter's replay) runs.

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
  KEYS[13] completed
  KEYS[14] failed

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  key              the schedule's key
  ARGV[4]  current          the due time of the occurrence that was claimed (ms)
  ARGV[5]  following        when the next occurrence is due (ms), or -1: the schedule ends
  ARGV[6]  id               the claimed occurrence's job id
  ARGV[7]  token            the lock token its claim holds

  Returns: 1 the next occurrence was added, 2 the schedule ended and was removed, 0 nothing to
           do (the schedule is gone, or has moved past `current` already): in these three the
           claimed occurrence runs; 3 SKIPPED: the claimed occurrence was removed without
           running (and the next added, or the schedule ended); -3 NOT_HELD: the claimed
           occurrence is not held under `token` (gone, or claimed again: nothing written),
           which a second run of a call that skipped it also answers.
  Events:  delayed | waiting (jobId) for the occurrence added; skipped (jobId, running) for
           the occurrence skipped
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include finish
-- @include repeat

local q = queue_keys(1)
local key, schedule, id, now = ARGV[3], KEYS[12], ARGV[6], tonumber(ARGV[1])
if redis.call('HGET', q.job_prefix .. id, 'lockToken') ~= ARGV[7] then return -3 end
local f = redis.call('HMGET', schedule, 'next', 'overlap', 'run')
if f[1] ~= ARGV[4] then return 0 end
local running = f[2] == 'skip' and f[3] and f[3] ~= id and f[3]
if running and (redis.call('EXISTS', q.job_prefix .. running) == 0
    or redis.call('ZSCORE', KEYS[13], running) or redis.call('ZSCORE', KEYS[14], running)) then
  running = false  -- it has ended: this one runs
end
local held
if running then
  local code
  code, held = release(q, id, ARGV[7])
  if code ~= 0 then return -3 end
end
local following, reply = tonumber(ARGV[5]), 1
if following < 0 then
  redis.call('DEL', schedule)
  redis.call('ZREM', KEYS[11], key)
  reply = 2
else
  redis.call('HSET', schedule, 'next', following, running and 'skipped' or 'run', id)
  redis.call('ZADD', KEYS[11], following, key)
  add_occurrence(q, schedule, key, following, now, ARGV[2])
end
if not running then return reply end
drop_job(q, id, now, held[4])
wake_capped(q)
emit(q.events, ARGV[2], 'skipped', 'jobId', id, 'running', running)
return 3
