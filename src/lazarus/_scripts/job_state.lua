--[[
  job_state: where job `id` is now, read in one step. No list is searched: the wait list can
  hold millions of ids, and finding one in it reads them all. A job whose hash exists, and
  that none of the other places holds, is in the wait list, the one place left (every
  transition that writes a job's hash puts it somewhere, and every one that takes it out of
  everywhere deletes the hash). The active list needs no search either: a job is in it exactly
  while it holds a lease.

  KEYS[1]  completed
  KEYS[2]  failed
  KEYS[3]  delayed
  KEYS[4]  prioritized
  KEYS[5]  leases
  KEYS[6]  meta
  KEYS[7]  job
  KEYS[8]  dl               the queue's dead letter store prefix

  ARGV[1]  id

  Returns: waiting (also a dead letter in the store), paused, prioritized, delayed, active,
           completed, failed or unknown.
]]
local id = ARGV[1]
local status = redis.call('HGET', KEYS[7], 'dlq:status')
if status and redis.call('ZSCORE', KEYS[8] .. 'i:s:' .. status, id) then return 'waiting' end
if redis.call('ZSCORE', KEYS[1], id) then return 'completed' end
if redis.call('ZSCORE', KEYS[2], id) then return 'failed' end
if redis.call('ZSCORE', KEYS[3], id) then return 'delayed' end
if redis.call('ZSCORE', KEYS[5], id) then return 'active' end
local paused = redis.call('HEXISTS', KEYS[6], 'paused') == 1
if redis.call('ZSCORE', KEYS[4], id) then return paused and 'paused' or 'prioritized' end
-- A dead letter out of the store (claimed, detached) with no lease is in no list.
if status or redis.call('EXISTS', KEYS[7]) == 0 then return 'unknown' end
return paused and 'paused' or 'waiting'
