--[[
  add_log: appends one line to a job's logs, keeping the newest `keep` lines (any state).

  KEYS[1]  job
  KEYS[2]  logs             the job's log list (includes/job_logs.lua)

  ARGV[1]  line
  ARGV[2]  keep             the most lines kept, >= 1: older lines go first

  Returns: the number of lines kept, or -1 (JOB_NOT_FOUND) when the job is gone (nothing is
           written).
  Events:  none
]]

if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local count = redis.call('RPUSH', KEYS[2], ARGV[1])
local keep = tonumber(ARGV[2])
if count > keep then
  redis.call('LTRIM', KEYS[2], -keep, -1)
  return keep
end
return count
