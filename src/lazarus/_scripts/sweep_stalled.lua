--[[
  sweep_stalled: active -> waiting for jobs whose lease expired (the worker died or blocked),
  or, once a job has stalled more than max_stalled times, active -> failed (under the job's
  own remove_on_fail, read from its opts, as a worker's failure applies it), or active ->
  dead letter when a dead letter queue is given, unless the job's on_exhaustion says fail
  (failed) or discard (deleted). Each stall is recorded as an attempt.

  KEYS[1]  wait
  KEYS[2]  prioritized
  KEYS[3]  pc
  KEYS[4]  delayed
  KEYS[5]  active
  KEYS[6]  leases
  KEYS[7]  marker
  KEYS[8]  meta
  KEYS[9]  events
  KEYS[10] job_prefix
  KEYS[11] failed
  KEYS[12] dlq_dl           KEYS[12..16] only with a dead letter queue: its store prefix;
                            or, when across is 1, the source queue's moves hash alone
  KEYS[13] dlq_marker
  KEYS[14] dlq_events
  KEYS[15] dlq_meta
  KEYS[16] dlq_job_prefix

  ARGV[1]  now
  ARGV[2]  max_stalled      stalls allowed before the failure is terminal, for a job
                            without a 'stallLimit' of its own (claim_jobs' stall_limit: an
                            OJS server's jobs keep the server's limit whoever sweeps them)
  ARGV[3]  maxlen
  ARGV[4]  source_queue
  ARGV[5]  dead_letter_queue  '' without one
  ARGV[6]  limit            most jobs to sweep per call
  ARGV[7]  across           1 when the dead letter queue is in another Redis Cluster slot: a
                            job stalled too often is recorded as a move (includes/move_out.lua)
                            for _moves.py to finish, instead of dead-lettered here
  ARGV[8]  budget_us        the call's time budget, microseconds (includes/budget.lua); ''
                            or absent for none but the limit
  ARGV[9]  keep_count       ARGV[9..11]: the worker's own remove_on_fail (KeepPolicy.args),
  ARGV[10] keep_age_ms      for a job failed here whose options keep everything; absent:
  ARGV[11] remove_now       keep all

  A replayed job stalled too often goes back to the dead letter queue its dead letter waits
  in (the job's replayDlq), as a failing one does (_execution.py), whatever this sweep's own
  dead letter queue, or none: when that is another queue, the job leaves as a move
  (includes/move_out.lua, in the source queue's moves hash, derived from KEYS[10]) for the
  caller to finish with dead_letter_in, which returns it into its dead letter.

  A dead letter's id is derived from the job (queue, id, attempt) and now, never taken from
  ARGV, and skips any id in use: a sweep run twice cannot give one id to two jobs or
  overwrite a dead letter. A second run sweeps only leases that expired since the first.

  Returns: {requeued, failed, dead_lettered, more, moves}: the ids of the stalled jobs by
           outcome (moved ones count as dead-lettered, discarded ones as failed), 1 when the budget stopped the call
           before its limit with expired leases left (else 0), and the ids of the moves
           recorded, for the caller to finish (_moves.finish).
  Events:  stalled (jobId), then waiting, failed, discarded or failed + deadLettered as for
           the other transitions
  Outbox:  dead-lettered, for a job stalled too often
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include json_append
-- @include queue_keys
-- @include enqueue
-- @include finish
-- @include dead_letter
-- @include move_out
-- @include budget
-- @include requeue
-- @include lock_token

local q = queue_keys(1)
local now = tonumber(ARGV[1])
local max_stalled = tonumber(ARGV[2])
local maxlen = ARGV[3]
local has_dlq = ARGV[5] ~= ''
local across = ARGV[7] == '1'
local dlq = (has_dlq and not across) and {dl = KEYS[12], marker = KEYS[13], events = KEYS[14],
  meta = KEYS[15], job_prefix = KEYS[16]} or nil
local limit = tonumber(ARGV[6])
local budgeted = (ARGV[8] or '') ~= ''
if budgeted then budget_start(ARGV[8]) end

-- dead_letter_id(id, attempt): 28 hex digits (as new dead letter ids have) from the job and
-- now; the first id not in use.
local function dead_letter_id(id, attempt, moving)
  local seed = ARGV[4] .. '\0' .. id .. '\0' .. attempt .. '\0' .. ARGV[1]
  local dl_id, n = string.sub(redis.sha1hex(seed), 1, 28), 0
  if moving then return dl_id end  -- the target's keys are out of reach; now makes it unique
  while redis.call('EXISTS', dlq.job_prefix .. dl_id) == 1 do
    n = n + 1
    dl_id = string.sub(redis.sha1hex(seed .. '\0' .. n), 1, 28)
  end
  return dl_id
end

-- options_of(raw): the job's options (its 'opts' field), as a table ({} when they cannot be
-- read). They are lazarus's own JSON, never the payload.
local function options_of(raw)
  local ok, opts = pcall(cjson.decode, raw or '{}')
  return (ok and type(opts) == 'table') and opts or {}
end

-- keep_failed(opts): the job's own retention of failed jobs, as KeepPolicy reads its opts'
-- removeOnFail (true, a count, or {age (s), count}): keep_count, keep_age_ms, remove_now;
-- the worker's (ARGV[9..11]) when it has none.
local function keep_failed(opts)
  local rule = opts['removeOnFail']
  if rule == true then return -1, -1, 1 end
  if type(rule) == 'number' then return rule, -1, 0 end
  if type(rule) == 'table' then
    local age = tonumber(rule['age'])
    return tonumber(rule['count']) or -1, age and age * 1000 or -1, 0
  end
  return tonumber(ARGV[9]) or -1, tonumber(ARGV[10]) or -1, tonumber(ARGV[11]) or 0
end

-- home_of(replay_of, replay_dlq): the dead letter queue a replayed job (its fields of those
-- names) goes back to when that is not this sweep's own (then it moves there), else nil.
local function home_of(replay_of, replay_dlq)
  if replay_of and replay_dlq and replay_dlq ~= '' and replay_dlq ~= ARGV[5] then
    return replay_dlq
  end
  return nil
end

local moves_key = across and KEYS[12] or string.sub(q.job_prefix, 1, -5) .. 'moves'
local requeued, failed, dead, moves = {}, {}, {}, {}
local more, left = 0, 0  -- left: jobs taken out of active
local expired = redis.call('ZRANGEBYSCORE', q.leases, '-inf', now, 'LIMIT', 0, limit)
for i, id in ipairs(expired) do
  if i > 1 and budgeted and budget_spent() then
    more = 1
    break
  end
  redis.call('ZREM', q.leases, id)
  local key = q.job_prefix .. id
  -- From the tail, where the oldest claims are (includes/finish.lua's release).
  if redis.call('LREM', q.active, -1, id) == 1 and redis.call('EXISTS', key) == 1 then
    left = left + 1
    local f = redis.call('HMGET', key, 'processedOn', 'ats', 'lockToken', 'opts', 'replayOf',
      'replayDlq', 'stallLimit')
    redis.call('HDEL', key, 'lockToken')
    local stalls = redis.call('HINCRBY', key, 'stalledCounter', 1)
    local message = 'job stalled: its lock expired (stall ' .. stalls .. ')'
    local worker = lock_token_worker(f[3])
    local record = cjson.encode({attempt = tonumber(f[2]) or 0,
      startedAt = tonumber(f[1]) or 0, finishedAt = now, worker = worker,
      outcome = 'stalled', error = message, errorType = 'Stalled'})
    emit(q.events, maxlen, 'stalled', 'jobId', id)
    if stalls > (tonumber(f[7]) or max_stalled) then
      local reason = 'job stalled more than allowable limit'
      local made = record_failure(key, now, reason, 'Stalled', cjson.encode(message), record)
      local opts = options_of(f[4])
      -- As a worker's failure for good: the job's on_exhaustion first, then its own dead
      -- letter (a replay), then this sweep's dead letter queue, else failed.
      local exhaustion = opts['onExhaustion']
      local dead_letters = exhaustion ~= 'fail' and exhaustion ~= 'discard'
      local home = dead_letters and home_of(f[5], f[6])
      if exhaustion == 'discard' then
        discard_terminal(q, id, reason, made, now, maxlen)
        failed[#failed + 1] = id
      elseif home or (dead_letters and has_dlq and across) then
        local dl_id = dead_letter_id(id, f[2] or '0', true)
        move_out(q, id, moves_key, dl_id, now, 'stalled', ARGV[4], home or ARGV[5], maxlen)
        moves[#moves + 1] = dl_id
        dead[#dead + 1] = id
      elseif dead_letters and has_dlq then
        local dl_id = dead_letter_id(id, f[2] or '0')
        dead_letter(q, id, dlq, dlq.job_prefix .. dl_id, dl_id, now, 'stalled', ARGV[4],
          ARGV[5], maxlen)
        dead[#dead + 1] = id
      else
        local keep_count, keep_age, remove_now = keep_failed(opts)
        fail_terminal(q, KEYS[11], id, now, keep_count, keep_age, remove_now, maxlen)
        failed[#failed + 1] = id
      end
    else
      redis.call('HINCRBY', key, 'attemptsMade', 1)
      json_append(key, 'stacktrace', cjson.encode(message))
      json_append(key, 'attempts', record)
      -- A stalled job has waited its turn already: it goes to the front of the line.
      requeue(q, id, maxlen)
      requeued[#requeued + 1] = id
    end
  end
end
-- The room a job that failed for good left is a waiting worker's (a requeued job set the marker).
if left > #requeued then wake_capped(q) end
return {requeued, failed, dead, more, moves}
