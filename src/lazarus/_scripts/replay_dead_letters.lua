--[[
  replay_dead_letters: dead letter -> waiting | prioritized | delayed in its source queue, as a
  new job with the original payload and options, attempts reset and replayCount + 1, and the
  dead letter's logs; the dead letter leaves the store in the same step. A dead letter
  replayed, purged or taken by someone else first is reported, never replayed twice. Safe to
  send again: a call whose new job exists already (the same call, re-sent after a dropped
  connection) reports its state.

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
  ARGV[4..] per pair five values: dead_letter_id, new_id, opts, priority, attempts; opts,
           priority and attempts are '' to keep the original ones

  Returns: one entry per pair: the state the new job entered, or -1 JOB_NOT_FOUND (gone
           already), -4 NOT_A_DEAD_LETTER (left untouched), -6 JOB_STATE (not in the store: a
           worker on the dead letter queue holds it; untouched).
  Events:  dead letter queue: replayed (jobId, newJobId, queue); source queue: waiting |
           delayed (jobId); the new job's hash records replayOf
  Outbox:  replayed, per dead letter replayed (with its fields)
           (while the dead letter queue's outbox is on: includes/outbox.lua)
]]
-- @include events
-- @include queue_keys
-- @include enqueue
-- @include store
-- @include job_logs

local src = queue_keys(4)
local dl = KEYS[1]
local now = tonumber(ARGV[1])
local maxlen = ARGV[2]

local function state_of(id)
  if redis.call('ZSCORE', src.delayed, id) then return 'delayed' end
  if redis.call('ZSCORE', src.prioritized, id) then return 'prioritized' end
  return 'waiting'
end

local results = {}
local replayed = 0
for i = 14, #KEYS, 2 do
  local a = 4 + (i - 14) / 2 * 5
  local dl_key, new_key, dl_id, new_id = KEYS[i], KEYS[i + 1], ARGV[a], ARGV[a + 1]
  local f = redis.call('HMGET', dl_key, 'dlq:sourceQueue', 'name', 'data', 'dlq:originalOpts',
    'dlq:priority', 'dlq:delay', 'dlq:atm', 'dlq:replayCount')
  local result
  if redis.call('HGET', new_key, 'replayOf') == dl_id then
    result = state_of(new_id)
  elseif not f[1] then
    result = (redis.call('EXISTS', dl_key) == 1) and -4 or -1
  elseif not store_remove(dl, dl_id, dl_key, 'replayed', ARGV[1]) then
    result = -6
  else
    local opts = ARGV[a + 2] ~= '' and ARGV[a + 2] or f[4] or '{}'
    local priority = tonumber(ARGV[a + 3] ~= '' and ARGV[a + 3] or f[5]) or 0
    local delay = tonumber(f[6]) or 0
    local atm = ARGV[a + 4] ~= '' and ARGV[a + 4] or f[7] or 1
    redis.call('HSET', new_key, 'name', f[2] or '', 'data', f[3] or 'null', 'opts', opts,
      'timestamp', now,
      'delay', delay, 'priority', priority, 'atm', atm, 'attemptsMade', 0,
      'rc', (tonumber(f[8]) or 0) + 1, 'replayOf', dl_id)
    move_logs(dl_key, new_key)
    redis.call('DEL', dl_key)
    emit(KEYS[2], maxlen, 'replayed', 'jobId', dl_id, 'newJobId', new_id, 'queue', ARGV[3])
    result = enqueue(src, new_id, priority, delay, now, maxlen)
    replayed = replayed + 1
  end
  results[#results + 1] = result
end
if replayed > 0 then redis.call('HINCRBY', KEYS[3], 'count:replayed', replayed) end
return results
