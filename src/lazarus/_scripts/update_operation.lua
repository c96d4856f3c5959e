--[[
  update_operation: a running bulk operation's record -> changed, by the server that holds it
  (its progress, its lease, its end) or by anyone (a cancel). A server whose lease ran out,
  and which another server has claimed since (claim_operation.lua), changes nothing and
  learns so: it stops. So does every server once the operation was cancelled.

  KEYS[1]  record           <prefix>:bulkops:<id>, the operation's record

  ARGV[1]  server           the server that must hold it; '' for any
  ARGV[2]  ttl              seconds the record is kept after this write
  ARGV[3..] field, value    the fields to set

  Returns: 1 when the record was changed; 0 when it is not running (done, failed, cancelled
           or gone) or another server holds it (nothing changed).
  Events:  none
]]

local found = redis.call('HMGET', KEYS[1], 'status', 'server')
if found[1] ~= 'running' or (ARGV[1] ~= '' and found[2] ~= ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
