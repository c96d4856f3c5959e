-- enqueue(q, id, priority, delay, now, maxlen, pushed): place a job that is ready or delayed
-- into the right structure of queue q (a table of keys: wait, prioritized, pc, delayed, marker,
-- events), record its event and wake an idle worker. Returns the state the job entered. With
-- `pushed` (a list), a job for the wait list is appended to it instead, for the caller to LPUSH
-- with the others in one command (enqueue_push) before the script ends.
-- The markers set by this script call: one ZADD wakes the workers, however many jobs follow
-- (only a worker's BZPOPMIN takes the marker away, never a script).
local enqueue_marked = {}
local function enqueue_mark(q)
  if not enqueue_marked[q.marker] then
    redis.call('ZADD', q.marker, 0, '0')
    enqueue_marked[q.marker] = true
  end
end

local function enqueue(q, id, priority, delay, now, maxlen, pushed)
  if delay > 0 then
    local due = now + delay
    redis.call('ZADD', q.delayed, due, id)
    enqueue_mark(q)
    emit(q.events, maxlen, 'delayed', 'jobId', id, 'delay', due)
    return 'delayed'
  end
  if priority > 0 then
    local counter = redis.call('INCR', q.pc) % 4294967296
    redis.call('ZADD', q.prioritized, priority * 4294967296 + counter, id)
  elseif pushed then
    pushed[#pushed + 1] = id
  else
    redis.call('LPUSH', q.wait, id)
  end
  enqueue_mark(q)
  emit(q.events, maxlen, 'waiting', 'jobId', id)
  if priority > 0 then return 'prioritized' end
  return 'waiting'
end

-- enqueue_push(q, pushed): LPUSH the ids that enqueue gathered in `pushed`, in their order.
local function enqueue_push(q, pushed)
  for i = 1, #pushed, 1000 do
    redis.call('LPUSH', q.wait, unpack(pushed, i, math.min(i + 999, #pushed)))
  end
end

-- wait_remove(q, id): take job `id` out of queue q's wait list; whether it was there. The
-- newest jobs sit at the head and the next to run at the tail, and LREM compares every id
-- from the end it starts at: so it starts from the head when `id` is among the
-- WAIT_REMOVE_NEAR newest, else from the tail, and never reads the list whole for a job near
-- either end (a job in the middle of a long list still costs a search to it).
local WAIT_REMOVE_NEAR = 1000
local function wait_remove(q, id)
  local near_head = redis.call('LPOS', q.wait, id, 'MAXLEN', WAIT_REMOVE_NEAR)
  return redis.call('LREM', q.wait, near_head and 1 or -1, id) > 0
end
