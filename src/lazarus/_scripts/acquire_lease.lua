--[[
  acquire_lease: free | held by this holder -> held by this holder for lease_ms: the lease of a
  periodic duty of a dead letter queue (pruning), taken when free or expired, renewed when
  held already; another holder's live lease is left alone.

  KEYS[1]  lease            the duty's lease key

  ARGV[1]  holder           who asks
  ARGV[2]  lease_ms

  Returns: 1 when the holder holds the lease after the call, 0 when another one does.
  Events:  none
]]

if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
