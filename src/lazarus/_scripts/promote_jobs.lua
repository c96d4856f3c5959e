--[[
  promote_jobs: delayed -> waiting | prioritized, now, for the delayed jobs due soonest: at
  most `limit` per call, and for as long as the call's time budget lasts (includes/budget.lua);
  the caller calls again to go on. Each job is promoted as by promote_job; an id in delayed
  whose job is gone is dropped from it.

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

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  limit            most delayed ids to take
  ARGV[4]  budget_us        the call's time budget, microseconds

  Returns: {left, dropped, id, ...}: how many ids are still delayed, how many ids of jobs gone
           were dropped, then the ids of the jobs promoted, soonest due first (the first of
           them runs first).
  Events:  promoted (jobId), then waiting (jobId), for each job promoted
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include budget

local q = queue_keys(1)
local now = tonumber(ARGV[1])
budget_start(ARGV[4])
local reply = {0, 0}
local pushed = {}
for _, id in ipairs(redis.call('ZRANGE', q.delayed, 0, tonumber(ARGV[3]) - 1)) do
  if redis.call('EXISTS', q.job_prefix .. id) == 1 then
    promote_now(q, id, now, ARGV[2], pushed)
    reply[#reply + 1] = id
  else
    redis.call('ZREM', q.delayed, id)
    reply[2] = reply[2] + 1
  end
  if budget_spent() then break end
end
enqueue_push(q, pushed)
reply[1] = redis.call('ZCARD', q.delayed)
return reply
