--[[
  replay_dead_letters: dead letter (pending | manual | failed) -> processing, and a new job
  in its source queue (or another) with the original payload (or a replacement) and options,
  attempts reset, replayCount + 1 and a copy of the dead letter's logs, waiting |
  prioritized | delayed. The dead letter stays
  in the store as processing, with a timeline entry naming the new job, until that job
  completes (resolved) or fails for good (back to pending, or failed). A dead letter that is
  not in a replayable status (replayed already, archived, purged, or taken by a worker of the
  dead letter queue) is reported, never replayed twice. Safe to send again: a call whose new
  job exists already (the same call, re-sent after a dropped connection) reports its state.

  KEYS[1]  dlq_dl           the dead letter queue's store prefix
  KEYS[2]  dlq_events
  KEYS[3]  dlq_meta         holds the 'count:replayed' counter
  KEYS[4]  wait             KEYS[4..13]: the target (source) queue's keys
  KEYS[5]  prioritized
  KEYS[6]  pc
  KEYS[7]  delayed
  KEYS[8]  active
  KEYS[9]  leases
  KEYS[10] marker
  KEYS[11] meta
  KEYS[12] events
  KEYS[13] job_prefix
  KEYS[14..] dead_letter, new_job   pairs: the dead letter's hash and the new job's hash

  ARGV[1]  now
  ARGV[2]  maxlen
  ARGV[3]  queue            the name of the queue KEYS[4..13] belong to (the target)
  ARGV[4]  dead_letter_queue  the name of the dead letter queue (the new jobs' replayDlq)
  ARGV[5]  actor            redriver | policy | operator:<name>
  ARGV[6]  note             '' for none
  ARGV[7]  rule             the redrive rule that replays, '' for none
  ARGV[8]  budget_us        the call's time budget, microseconds (includes/budget.lua)
  ARGV[9]  since            ms: leave alone a dead letter replayed at or after it ('' for
                            none; a bulk replay's start, includes/replay_mark.lua)
  ARGV[10] tally            the tally the dead letters replayed are added to ('' for none:
                            includes/tally.lua)
  ARGV[11..] per pair six values: dead_letter_id, new_id, opts, priority, attempts, data;
           opts, priority, attempts and data are '' to keep the original ones (a new data
           replaces the dead letter's payload too; the timeline keeps the old one)

  Returns: one entry per pair handled, in order (fewer than given when the budget ran out:
           the caller sends the rest again): the state the new job entered, or -1
           JOB_NOT_FOUND (gone already), -4 NOT_A_DEAD_LETTER (left untouched), -5 JOB_EXISTS
           (a job holds the new job's id already: both left untouched), -6 JOB_STATE
           (not replayable: processing, resolved or archived, replayed since ARGV[9], or a
           worker on the dead letter queue holds it; untouched).
  Events:  dead letter queue: statusChanged (jobId, from, to, actor, note), replayed (jobId,
           newJobId, queue); target queue: waiting | delayed (jobId); the new job's hash
           records replayOf and replayDlq
  Outbox:  processing, per dead letter replayed
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include job_logs
-- @include budget
-- @include replay_mark
-- @include tally

local src = queue_keys(4)
local dl = KEYS[1]
local now = tonumber(ARGV[1])
local maxlen = ARGV[2]
local actor, note, rule = ARGV[5], ARGV[6], ARGV[7]
local since = tonumber(ARGV[9])
local REPLAYABLE = {pending = true, manual = true, failed = true}

local function state_of(id)
  if redis.call('ZSCORE', src.delayed, id) then return 'delayed' end
  if redis.call('ZSCORE', src.prioritized, id) then return 'prioritized' end
  return 'waiting'
end

local batch = store_batch(dl)
local pushed = {}  -- the new jobs for the wait list, pushed together (enqueue_push)
-- What the logs keys of the dead letters and of the new jobs begin with (job_side, made once).
local dl_logs, new_logs = job_side(batch.head, 'logs', ''), job_side(src.head, 'logs', '')

-- replay_one(dl_key, new_key, dl_id, new_id, f, score, a): turn the dead letter into a new job.
local function replay_one(dl_key, new_key, dl_id, new_id, f, score, a)
  local data, from = replay_mark(batch, dl_key, dl_id, new_id, f, score, a, now, actor, note,
    rule, since)
  local opts = ARGV[a + 2] ~= '' and ARGV[a + 2] or f[4] or '{}'
  local priority = tonumber(ARGV[a + 3] ~= '' and ARGV[a + 3] or f[5]) or 0
  local delay = tonumber(f[6]) or 0
  local atm = ARGV[a + 4] ~= '' and ARGV[a + 4] or f[7] or '1'
  redis.call('HSET', new_key, 'name', f[2] or '', 'data', data, 'opts', opts,
    'timestamp', int_text(now), 'delay', int_text(delay), 'priority', int_text(priority),
    'atm', atm, 'attemptsMade', '0', 'rc', int_text((tonumber(f[8]) or 0) + 1),
    'replayOf', dl_id, 'replayDlq', ARGV[4])
  copy_logs(dl_logs .. dl_id, new_logs .. new_id)
  emit(KEYS[2], maxlen, 'statusChanged', 'jobId', dl_id, 'from', from, 'to', 'processing',
    'actor', actor, 'note', note)
  emit(KEYS[2], maxlen, 'replayed', 'jobId', dl_id, 'newJobId', new_id, 'queue', ARGV[3])
  return enqueue(src, new_id, priority, delay, now, maxlen, pushed)
end

-- args_at(i): where the six ARGV values of the pair at KEYS[i] begin.
local function args_at(i)
  return 11 + (i - 14) / 2 * 6
end

local results = {}
local replayed = 0
-- held[status][id]: the arrival score of each dead letter in a replayable status, read for
-- the next HELD_AHEAD pairs at a time.
local HELD_AHEAD = 100
local held, held_to = {}, 13
budget_start(ARGV[8])
for i = 14, #KEYS, 2 do
  local a = args_at(i)
  local dl_key, new_key, dl_id, new_id = KEYS[i], KEYS[i + 1], ARGV[a], ARGV[a + 1]
  if i > held_to then
    held_to = math.min(i + 2 * HELD_AHEAD - 1, #KEYS)
    local ids = {}
    for j = i, held_to, 2 do ids[#ids + 1] = ARGV[args_at(j)] end
    held = store_held(dl, ids, REPLAYABLE)
  end
  local f = replay_read(dl_key)
  local status = f[9] or 'pending'
  local score = f[1] and held[status] and held[status][dl_id]
  local result
  -- This call ran before (re-sent after a dropped connection)? A dead letter replayed under
  -- the same id before, and back since (the original's id, given back twice), is not.
  if f[10] == new_id and (status == 'processing'
      or redis.call('HGET', new_key, 'replayOf') == dl_id) then
    result = state_of(new_id)
  elseif not f[1] then
    result = (redis.call('EXISTS', dl_key) == 1) and -4 or -1
  elseif not score or replayed_since(f, since) then
    result = -6
  elseif redis.call('EXISTS', new_key) == 1 then
    result = -5  -- the new job's id is another job's (an id the caller chose): left alone
  else
    result = replay_one(dl_key, new_key, dl_id, new_id, f, score, a)
    replayed = replayed + 1
    store_step(batch)
  end
  results[#results + 1] = result
  if budget_spent() then break end
end
store_flush(batch)
enqueue_push(src, pushed)
if replayed > 0 then
  redis.call('HINCRBY', KEYS[3], 'count:replayed', int_text(replayed))
  tally_add(dl, ARGV[10], replayed)
end
return results
