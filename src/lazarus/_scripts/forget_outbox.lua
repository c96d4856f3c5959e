--[[
  forget_outbox: one consumer group leaves a dead letter queue's outbox (its drainer retired
  for good, whose unacknowledged entries would otherwise be kept forever); when no group is
  left, the outbox is switched off and deleted, in the same step. A drainer that enables the
  outbox meanwhile (Outbox.enable: its group first, then the marker) either finds its group
  counted here, and the outbox kept, or the outbox gone, and creates it again: never an
  outbox deleted under its new group, or switched on with no group to drain it.

  KEYS[1]  outbox           the dead letter queue's outbox stream (includes/outbox.lua)
  KEYS[2]  enabled          the marker that switches the outbox on
  KEYS[3]  copied           the group's mark of a complete copy of the earlier dead letters

  ARGV[1]  group            the consumer group

  Returns: how many groups are left (0: the outbox is off and gone).
  Events:  none
]]

redis.call('DEL', KEYS[3])
local left = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('XGROUP', 'DESTROY', KEYS[1], ARGV[1])
  left = #redis.call('XINFO', 'GROUPS', KEYS[1])
end
if left == 0 then redis.call('DEL', KEYS[2], KEYS[1]) end
return left
