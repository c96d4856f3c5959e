-- @include numbers
-- enqueue(q, id, priority, delay, now, maxlen, pushed): place a job that is ready or delayed
-- into the right structure of queue q (a table of keys: wait, prioritized, pc, delayed, marker,
-- events), record its event and wake an idle worker. Returns the state the job entered. With
-- `pushed` (a list), a job for the wait list is appended to it instead, for the caller to LPUSH
-- with the others in one command (enqueue_push) before the script ends.
-- The markers set by this script call: one ZADD wakes the workers, however many jobs follow
-- (only a worker's BZPOPMIN takes the marker away, never a script).
local enqueue_marked = {}
-- delayed_head[key]: the due time (ms) of the earliest job of the delayed set `key`, -1 for
-- none, as this script call read it last (includes/claim.lua's promote_delayed), so that
-- next_due needs no read of its own. Whatever writes a delayed set clears its entry: enqueue
-- and promote_now here, promote_delayed itself. (The scripts that write a delayed set
-- otherwise, change_job, cancel_job, remove_job and the like, call neither of the two:
-- tests/scripts/test_source.py checks every script for it.)
local delayed_head = {}
local function enqueue_mark(q)
  if not enqueue_marked[q.marker] then
    redis.call('ZADD', q.marker, '0', '0')
    enqueue_marked[q.marker] = true
  end
end

-- wake_capped(q): after a job left active with no claim in its place, wake an idle worker
-- when the queue has a global concurrency (includes/claim.lua) and jobs are ready: a worker
-- that the cap refused waits on the marker for room.
local function wake_capped(q)
  if redis.call('HEXISTS', q.meta, 'concurrency') == 1
      and (redis.call('LLEN', q.wait) > 0 or redis.call('ZCARD', q.prioritized) > 0) then
    redis.call('ZADD', q.marker, '0', '0')
  end
end

local function enqueue(q, id, priority, delay, now, maxlen, pushed)
  if delay > 0 then
    local due = now + delay
    redis.call('ZADD', q.delayed, int_text(due), id)
    delayed_head[q.delayed] = nil
    enqueue_mark(q)
    emit(q.events, maxlen, 'delayed', 'jobId', id, 'delay', int_text(due))
    return 'delayed'
  end
  if priority > 0 then
    local counter = redis.call('INCR', q.pc) % 4294967296
    redis.call('ZADD', q.prioritized, int_text(priority * 4294967296 + counter), id)
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

-- promote_now(q, id, now, maxlen, pushed): make the delayed job `id` (whose hash is there)
-- ready now, by hand, as if its delay had just ended: out of delayed, its delay 0, into
-- waiting or prioritized by its priority (`pushed` as for enqueue). Returns the state it
-- entered, or false, having written nothing, when it is not delayed.
local function promote_now(q, id, now, maxlen, pushed)
  if redis.call('ZREM', q.delayed, id) == 0 then return false end
  delayed_head[q.delayed] = nil
  local key = q.job_prefix .. id
  redis.call('HSET', key, 'delay', 0)
  emit(q.events, maxlen, 'promoted', 'jobId', id)
  local priority = tonumber(redis.call('HGET', key, 'priority') or '0') or 0
  return enqueue(q, id, priority, 0, now, maxlen, pushed)
end

-- state_told(q, state): the state a job placed by hand (change_job, promote_job) is told to
-- be in, as job_state.lua tells it: a ready job of a paused queue is 'paused'.
local function state_told(q, state)
  if (state == 'waiting' or state == 'prioritized')
      and redis.call('HEXISTS', q.meta, 'paused') == 1 then
    return 'paused'
  end
  return state
end

-- enqueue_push(q, pushed): LPUSH the ids that enqueue gathered in `pushed`, in their order.
local function enqueue_push(q, pushed)
  for i = 1, #pushed, 1000 do
    redis.call('LPUSH', q.wait, unpack(pushed, i, math.min(i + 999, #pushed)))
  end
end

-- Holes: a job removed from deep inside a long wait list leaves its place as an empty id
-- (LSET, which costs no search), counted in the queue's meta 'holes'. A claim that pops a hole
-- skips it (wait_skip_hole); every count of waiting jobs is the list's length less the holes.
local function wait_hole(q, index)
  redis.call('LSET', q.wait, index, '')
  redis.call('HINCRBY', q.meta, 'holes', 1)
end

-- wait_skip_hole(q, id): whether `id`, popped from the wait list, is a hole (then counted out).
local function wait_skip_hole(q, id)
  if id ~= '' then return false end
  if redis.call('HINCRBY', q.meta, 'holes', -1) <= 0 then redis.call('HDEL', q.meta, 'holes') end
  return true
end

-- wait_remove(q, id, at): take job `id` out of queue q's wait list. The newest jobs sit at the
-- head and the next to run at the tail, and LREM compares every id from the end it starts at:
-- so a job among the WAIT_REMOVE_NEAR nearest either end is removed from that end, and a list
-- of at most WAIT_SEARCH_AT_MOST ids is searched whole (half a millisecond at most). A job
-- further inside a longer list is found by the caller, who reads the list in bounded pieces
-- (_scripts/wait_search.py): `at` is nil before it looked, the index where it saw the job, or
-- -2 to search the list whole after all, when its reads did not see the job or the job moved
-- away from every look. The job is in no other place, so its id must not stay behind in the
-- list, where a job added later under the same id would be claimed twice. The job is looked
-- for around `at` (jobs added meanwhile move it towards the tail, jobs removed near the head
-- back), and its place becomes a hole (wait_hole). Returns true when the job was removed,
-- false when it is not in the list, or nil and the index the caller should look from.
local WAIT_REMOVE_NEAR = 1000
local WAIT_SEARCH_AT_MOST = 20000
local WAIT_AHEAD, WAIT_BEHIND = 1000, 100
local function wait_remove(q, id, at)
  if redis.call('LPOS', q.wait, id, 'MAXLEN', WAIT_REMOVE_NEAR) then
    return redis.call('LREM', q.wait, 1, id) > 0
  end
  if redis.call('LPOS', q.wait, id, 'RANK', -1, 'MAXLEN', WAIT_REMOVE_NEAR) then
    return redis.call('LREM', q.wait, -1, id) > 0
  end
  if at == -2 or redis.call('LLEN', q.wait) <= WAIT_SEARCH_AT_MOST then
    return redis.call('LREM', q.wait, -1, id) > 0
  end
  if not at then return nil, 0 end
  local from = math.max(at - WAIT_BEHIND, 0)
  for i, found in ipairs(redis.call('LRANGE', q.wait, from, at + WAIT_AHEAD)) do
    if found == id then
      wait_hole(q, from + i - 1)
      return true
    end
  end
  return nil, from
end
