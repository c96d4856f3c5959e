--[[
  claim_operation: a running bulk operation that no server holds -> held by this server (a
  resume). A server holds a bulk operation (http/operations.py) while its lease is renewed;
  one that stopped (killed, or shut down, which gives the lease up) leaves it running with a
  lease that runs out, and the first server to claim it then goes on with it.

  KEYS[1]  record           <prefix>:bulkops:<id>, the operation's record

  ARGV[1]  now              ms
  ARGV[2]  lease_ms         how long the claim holds it without a renewal
  ARGV[3]  server           the claiming server's name
  ARGV[4]  ttl              seconds the record is kept after this write

  Returns: the record's fields and values (HGETALL) when it was claimed; 0 when another
           server holds it; -1 when it is not running (done, failed, cancelled or gone).
  Events:  none
]]

local now = tonumber(ARGV[1])
local found = redis.call('HMGET', KEYS[1], 'status', 'lease_until')
if found[1] ~= 'running' then
  return -1
end
if (tonumber(found[2]) or 0) > now then
  return 0
end
redis.call('HSET', KEYS[1], 'server', ARGV[3], 'lease_until', tostring(now + tonumber(ARGV[2])),
  'updated_at', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'resumes', 1)
redis.call('EXPIRE', KEYS[1], ARGV[4])
return redis.call('HGETALL', KEYS[1])
