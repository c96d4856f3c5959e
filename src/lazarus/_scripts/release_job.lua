--[[
  release_job: active -> waiting, at the front of the line (a dead letter a worker of its dead
  letter queue had taken: back into the store, pending), for a job whose worker is shutting
  down before its processor finished: the job runs again at once, on any worker, instead of
  waiting for its lease to expire and the stall sweep. No attempt is counted: the processor
  neither failed nor finished.

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

  ARGV[1]  id
  ARGV[2]  token            the lock token the worker holds
  ARGV[3]  maxlen           events stream length

  Returns: 0, or an error code: -1 JOB_NOT_FOUND, -2 LOCK_MISMATCH, -3 NOT_ACTIVE (the worker
           lost the job: nothing is changed).
  Events:  waiting (jobId)
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include finish
-- @include requeue

local q = queue_keys(1)
local id = ARGV[1]
local code = release(q, id, ARGV[2])
if code ~= 0 then return code end
requeue(q, id, ARGV[3])
return 0
