-- @include store
-- @include lock_token
-- promote_delayed(q, now, maxlen): move delayed jobs that are due to waiting (or prioritized),
-- earliest first, at most PROMOTE_AT_MOST per call: every claim and outcome call promotes, so
-- a burst of jobs due at once (a schedule's batch) goes over many calls, none long. Returns
-- how many moved. It reads the earliest first: when none is due (mostly), that read is
-- next_due's answer too (enqueue.lua's delayed_head).
local PROMOTE_AT_MOST = 100
local function promote_delayed(q, now, maxlen)
  local first = redis.call('ZRANGE', q.delayed, '0', '0', 'WITHSCORES')
  if #first == 0 or tonumber(first[2]) > now then
    delayed_head[q.delayed] = #first == 0 and -1 or tonumber(first[2])
    return 0
  end
  delayed_head[q.delayed] = nil
  local due = redis.call('ZRANGEBYSCORE', q.delayed, '-inf', int_text(now), 'LIMIT', '0',
    int_text(PROMOTE_AT_MOST))
  redis.call('ZREM', q.delayed, unpack(due))
  local pushed = {}
  for _, id in ipairs(due) do
    local priority = tonumber(redis.call('HGET', q.job_prefix .. id, 'priority') or '0') or 0
    enqueue(q, id, priority, 0, now, maxlen, pushed)
  end
  enqueue_push(q, pushed)
  return #due
end

-- claimed_reply(key, id, token): a claimed job as claims return it: {id, token, field, value, ...}
-- (the job hash).
local function claimed_reply(key, id, token)
  local reply = {id, token}
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields do reply[#reply + 1] = fields[i] end
  return reply
end

-- The queue's rate limit (meta 'limiter:max' and 'limiter:duration'): at most max claims per
-- window of duration ms, across every worker. The window's count is the STRING
-- '<prefix>:{<queue>}:limiter', which expires with the window (derived from meta: the same
-- hash tag). limited_until is the end of the window (ms) once a claim of this call was
-- refused by the limit, else -1: next_due reports it, so the worker waits until then.
local limited_until = -1

-- The queue's global concurrency (meta 'concurrency'): at most that many jobs active (claimed,
-- held ahead included) across every worker. A claim refused by it sets no marker: the worker
-- waits on the marker until a job leaves active without a claim taking its place
-- (includes/enqueue.lua's wake_capped), or its wait times out.

-- claim_next(q, now, token_base, lock_ms, maxlen): move the next job (waiting first, then by
-- priority) to active under a lease and return {id, token, field, value, ...}, or false when
-- the queue is paused, empty, at its rate limit or at its global concurrency. Wakes another idle worker when more jobs
-- are ready. What it passes over on the way (holes, ids of jobs gone, index entries of dead
-- letters gone) it drops, CLAIM_SKIP_AT_MOST at most: past that it returns false with the
-- marker set, and the worker, woken at once, claims again in a call of its own, so no claim
-- holds Redis long whatever a removal left behind.
local CLAIM_SKIP_AT_MOST = 1000
local function claim_later(q)
  redis.call('ZADD', q.marker, '0', '0')
  return false
end

local function claim_next(q, now, token_base, lock_ms, maxlen)
  local meta = redis.call('HMGET', q.meta, 'paused', 'limiter:max', 'limiter:duration',
    'concurrency')
  if meta[1] then return false end
  local cap = tonumber(meta[4])
  if cap and redis.call('LLEN', q.active) >= cap then return false end
  local limiter = meta[2] and (string.sub(q.meta, 1, -5) .. 'limiter')
  if limiter and tonumber(redis.call('GET', limiter) or '0') >= tonumber(meta[2]) then
    limited_until = now + math.max(redis.call('PTTL', limiter), 0)
    return false
  end
  local skipped = 0
  while true do
    local id = redis.call('RPOP', q.wait)
    while id and wait_skip_hole(q, id) do
      skipped = skipped + 1
      if skipped >= CLAIM_SKIP_AT_MOST then return claim_later(q) end
      id = redis.call('RPOP', q.wait)
    end
    if not id then
      local popped = redis.call('ZPOPMIN', q.prioritized)
      if #popped == 0 then
        -- A worker on a dead letter queue takes its pending dead letters, oldest first.
        popped = redis.call('ZRANGE', q.dl .. 'i:s:pending', '0', '0')
        if #popped == 0 then return false end
        if not store_remove(q.dl, popped[1], q.job_prefix .. popped[1], 'claimed', now) then
          -- An entry whose dead letter is not there as pending (its hash gone) would be
          -- found again and again: it leaves the index, and the loop goes on.
          redis.call('ZREM', q.dl .. 'i:s:pending', popped[1])
          popped[1] = false
        end
      end
      id = popped[1]
    end
    local key = id and q.job_prefix .. id
    -- A job removed while it waited leaves its id behind (no fields): skip it. The fields
    -- read here also make the reply, without a call of their own.
    local fields = key and redis.call('HGETALL', key) or {}
    if #fields > 0 then
      redis.call('LPUSH', q.active, id)
      local started = '1'
      for i = 1, #fields, 2 do
        if fields[i] == 'ats' then
          started = int_text((tonumber(fields[i + 1]) or 0) + 1)
          break
        end
      end
      local token = lock_token(token_base, started, emit(q.events, maxlen, 'active', 'jobId', id))
      local changed = {'ats', started, 'lockToken', token, 'processedOn', int_text(now)}
      redis.call('HSET', key, unpack(changed))
      redis.call('ZADD', q.leases, int_text(now + lock_ms), id)
      if limiter and redis.call('INCR', limiter) == 1 then
        redis.call('PEXPIRE', limiter, meta[3])
      end
      -- More ready jobs wake another idle worker, unless the cap leaves it no room.
      if (not cap or redis.call('LLEN', q.active) < cap) and (redis.call('LLEN', q.wait) > 0
          or redis.call('ZCARD', q.prioritized) > 0
          or redis.call('ZCARD', q.dl .. 'i:s:pending') > 0) then
        redis.call('ZADD', q.marker, '0', '0')
      end
      -- As HGETALL would answer now: of two fields of one name, the reader keeps the later.
      local reply = {id, token}
      for i = 1, #fields do reply[#reply + 1] = fields[i] end
      for i = 1, #changed do reply[#reply + 1] = changed[i] end
      return reply
    end
    skipped = skipped + 1
    if skipped >= CLAIM_SKIP_AT_MOST then return claim_later(q) end
  end
end

-- next_due(q): the due time of the earliest delayed job, or -1; or the end of the rate
-- limit's window when that comes first and a claim of this call met the limit.
local function next_due(q)
  local due = delayed_head[q.delayed]
  if not due then
    local first = redis.call('ZRANGE', q.delayed, '0', '0', 'WITHSCORES')
    due = #first == 0 and -1 or tonumber(first[2])
  end
  if limited_until >= 0 and (due < 0 or limited_until < due) then return limited_until end
  return due
end
