--[[
  extend_locks: renew the leases of active jobs whose lock token the worker still holds.

  KEYS[1]  leases
  KEYS[2]  job_prefix

  ARGV[1]  expires_at       new lease expiry (ms)
  ARGV[2..] id, token       pairs, one per job the worker runs

  Returns: {lost, cancelled, cancels}: the ids whose lock the worker no longer holds
           (stalled and taken back); {id, reason, ...} of the jobs it still holds that
           cancel_job.lua asked to stop (their leases are renewed: the worker records them as
           cancelled); and the queue's count of such requests ('<prefix>:{<queue>}:cancels',
           false for none), which the worker then watches for the next.
  Events:  none

  Renewal must go on while Redis is at its memory limit, or healthy jobs stall: it only
  rewrites the scores of existing members, so it never grows memory. Redis refuses a
  script's first memory-growing command (ZADD) at the limit unless the script has written
  already; the leading ZREM of a member that cannot exist is such a write, and changes
  nothing.
]]
redis.call('ZREM', KEYS[1], '')
local lost, cancelled = {}, {}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local f = redis.call('HMGET', KEYS[2] .. id, 'lockToken', 'cancel')
  if f[1] == ARGV[i + 1] then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[1], id)
    if f[2] then
      cancelled[#cancelled + 1] = id
      cancelled[#cancelled + 1] = f[2]
    end
  else
    lost[#lost + 1] = id
  end
end
return {lost, cancelled, redis.call('GET', string.sub(KEYS[2], 1, -5) .. 'cancels')}
