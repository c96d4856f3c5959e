--[[
  claim_jobs: delayed -> waiting for jobs that are due, then waiting -> active for up to
  `count` jobs, each under a lease (lock token + expiry in leases).

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

  ARGV[1]  now              milliseconds
  ARGV[2]  token_base       the worker's token; each claim appends ':<attempt started>'
  ARGV[3]  lock_ms          lease length
  ARGV[4]  count            most jobs to claim
  ARGV[5]  maxlen           events stream length
  ARGV[6]  clock_offset     optional, milliseconds: when given, now is the server's TIME plus
                            this offset and ARGV[1] is ignored. A claim sent behind a blocking
                            BZPOPMIN runs when the pop returns, so its send time is stale; the
                            worker measures the offset between its clock and the server's.

  Returns: {next_due, job, job, ...}: next_due is the due time of the earliest delayed job or
           -1; each job is {id, token, field, value, ...} (the job hash).
  Events:  waiting (promoted jobs), active (jobId) per job claimed
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include claim

local q = queue_keys(1)
local now = tonumber(ARGV[1])
if ARGV[6] then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[6])
end
local maxlen = ARGV[5]
promote_delayed(q, now, maxlen)
local reply = {0}
for _ = 1, tonumber(ARGV[4]) do
  local job = claim_next(q, now, ARGV[2], tonumber(ARGV[3]), maxlen)
  if not job then break end
  reply[#reply + 1] = job
end
reply[1] = next_due(q)
return reply
