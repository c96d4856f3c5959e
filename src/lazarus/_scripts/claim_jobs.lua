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
  KEYS[11] reply            the worker's claim memo (includes/once.lua)

  ARGV[1]  now              milliseconds
  ARGV[2]  token_base       the worker's token; each claim appends ':<attempt started>:<the
                            ID of its active event>'
  ARGV[3]  lock_ms          lease length
  ARGV[4]  count            most jobs to claim
  ARGV[5]  maxlen           events stream length
  ARGV[6]  call_id          fresh per claim, kept by the worker until a reply arrives
  ARGV[7]  clock_offset     optional, milliseconds: when given (and not ''), now is the
                            server's TIME plus this offset and ARGV[1] is ignored. A claim sent
                            behind a blocking BZPOPMIN runs when the pop returns, so its send
                            time is stale; the worker measures the offset between its clock and
                            the server's.
  ARGV[8]  memo_ms          optional: how long the claim memo lives (ms); by default twice
                            lock_ms. A caller that never sends the call again itself, only on
                            a dropped connection (an OJS fetch), needs it for less.
  ARGV[9]  stall_limit      optional: when given (and not ''), each job claimed keeps it as
                            its own 'stallLimit', the stalls it may have before a sweep fails
                            it, whoever sweeps (sweep_stalled): an OJS server hands jobs out
                            under its own limit, which a worker of the queue must not lower

  Returns: {next_due, job, job, ...}: next_due is the due time of the earliest delayed job or
           -1; each job is {id, token, field, value, ...} (the job hash). A second run of a
           call that claimed jobs (same call_id) claims nothing: it returns the jobs the first
           run claimed that are still held under its tokens.
  Events:  waiting (promoted jobs), active (jobId) per job claimed
  Outbox:  claimed (a worker on the dead letter queue took a dead letter)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include claim
-- @include once

local q = queue_keys(1)
local again = memo_replay(q, KEYS[11], ARGV[6], ARGV[2])
if again then
  table.insert(again, 1, next_due(q))
  return again
end
local now = tonumber(ARGV[1])
if ARGV[7] and ARGV[7] ~= '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + tonumber(ARGV[7])
end
local maxlen = ARGV[5]
local lock_ms = tonumber(ARGV[3])
promote_delayed(q, now, maxlen)
local jobs = {}
for _ = 1, tonumber(ARGV[4]) do
  local job = claim_next(q, now, ARGV[2], lock_ms, maxlen)
  if not job then break end
  if ARGV[9] and ARGV[9] ~= '' then
    redis.call('HSET', q.job_prefix .. job[1], 'stallLimit', ARGV[9])
  end
  jobs[#jobs + 1] = job
end
-- A claim that found nothing needs no memo: running it again orphans nothing.
if #jobs > 0 then
  memo_save(KEYS[11], ARGV[6], jobs, ARGV[2], tonumber(ARGV[8] or 2 * lock_ms))
end
table.insert(jobs, 1, next_due(q))
return jobs
