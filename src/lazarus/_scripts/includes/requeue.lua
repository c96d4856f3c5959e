-- @include events
-- @include store
-- requeue(q, id, maxlen): put job `id` of queue q, taken out of active already (released,
-- or stalled), back at the front of the line, and wake a worker. A dead letter that a worker
-- of its dead letter queue had taken (claim_next took it out of the store) goes back into the
-- store, pending, in its place by arrival: the oldest first, as claims take them. Any other
-- job goes to the tail of the wait list, to run next.
local function requeue(q, id, maxlen)
  local values, at, origin = store_values(q.job_prefix .. id)
  if values then
    store_add(q.dl, id, values, at, origin)
  else
    redis.call('RPUSH', q.wait, id)
  end
  redis.call('ZADD', q.marker, 0, '0')
  emit(q.events, maxlen, 'waiting', 'jobId', id)
end
