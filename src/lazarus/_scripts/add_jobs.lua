--[[
  add_jobs: [*] -> waiting | prioritized | delayed, for one or more new jobs.

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
  KEYS[11..] job            the hash of each new job, in the order of the ARGV groups;
                            then, with ARGV[4], one mark per job: a hash of the same slot
                            whose field ARGV[4] the job's add deletes (an OJS record's
                            `adding`: ojs/records.py), so that no mark outlives its add

  ARGV[1]  now              milliseconds: each job's add time (timestamp)
  ARGV[2]  maxlen           events stream length
  ARGV[3]  resent           1 when the call is sent again after a dropped connection (its
                            first send may have run), else 0
  ARGV[4]  mark             the field each job's mark loses once the job is in the queue
                            (added, or there already); '' for no marks
  ARGV[5..] job fields      seven per job: id, name, data, opts, delay, priority, attempts
                            (now, delay, priority and attempts as integers in decimal: the
                            job's hash keeps their text);
                            then, optionally, three per job: deduplication id ('' for none),
                            its ttl in ms (0: until the job completes or fails) and its mode
                            ('' or any of 'e' extend, 'r' replace: includes/dedup.lua)

  Returns: one entry per job: the state it entered ('waiting', 'prioritized', 'delayed'),
           -5 (JOB_EXISTS) when a job with that id is already there (it is left as it is),
           or when the call is resent and its first send added the job, which ran and was
           deleted since (its tombstone: includes/job_logs.lua), or {holder} when another
           job holds its deduplication id (nothing is written).
  Events:  waiting | delayed (jobId) per job added; deduplicated (jobId of the holder,
           deduplicationId, deduplicatedJobId) per job not added for its deduplication id;
           removed (jobId) per delayed holder a job replaced
]]
-- @include events
-- @include dedup
-- @include queue_keys
-- @include enqueue
-- @include job_logs

local q = queue_keys(1)
local now = tonumber(ARGV[1])
local maxlen = ARGV[2]
local results = {}
local pushed = {}  -- the ids for the wait list, pushed together at the end
local resent = ARGV[3] == '1'
local mark = ARGV[4]
local jobs = mark == '' and #KEYS - 10 or (#KEYS - 10) / 2
local dedup = 5 + jobs * 7  -- the first deduplication argument, if any
for i = 11, 10 + jobs do
  local a = 5 + (i - 11) * 7
  local d = dedup + (i - 11) * 3
  local dedup_id = ARGV[d] or ''
  local key = KEYS[i]
  if redis.call('EXISTS', key) == 1 or (resent and added_before(key, now)) then
    results[#results + 1] = -5
    if mark ~= '' then redis.call('HDEL', KEYS[i + jobs], mark) end
  else
    local holder = dedup_id ~= '' and dedup_take(q, dedup_id, tonumber(ARGV[d + 1]), ARGV[d + 2],
      ARGV[a], now, maxlen)
    if holder then
      results[#results + 1] = {holder}
    else
      local delay = tonumber(ARGV[a + 4])
      local priority = tonumber(ARGV[a + 5])
      redis.call('HSET', key, 'name', ARGV[a + 1], 'data', ARGV[a + 2], 'opts', ARGV[a + 3],
        'timestamp', ARGV[1], 'delay', ARGV[a + 4], 'priority', ARGV[a + 5],
        'atm', ARGV[a + 6], 'attemptsMade', '0')
      if dedup_id ~= '' then redis.call('HSET', key, 'deid', dedup_id) end
      results[#results + 1] = enqueue(q, ARGV[a], priority, delay, now, maxlen, pushed)
      if mark ~= '' then redis.call('HDEL', KEYS[i + jobs], mark) end
    end
  end
end
enqueue_push(q, pushed)
return results
