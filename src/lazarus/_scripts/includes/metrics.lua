-- Throughput metrics: how many of a queue's jobs completed and how many failed for good
-- (into failed, a dead letter queue, or discarded), per minute and in all. The counts live in
-- the HASH '<prefix>:{<queue>}:metrics', in the queue's hash tag:
--   'c:<minute>', 'f:<minute>'  the jobs that completed / failed for good in that minute
--                               (minutes since the epoch, by the recording client's clock)
--   'c', 'f'                    those of the minutes that have left the window
-- so that a total is 'c' plus every 'c:<minute>' (queue_metrics.py reads them). One HINCRBY
-- per outcome; the first outcome of a minute also folds the minutes older than
-- METRICS_MINUTES into the totals, a bounded walk of a hash of at most a few hundred fields.
-- @include numbers
local METRICS_MINUTES = 120

local function metrics_fold(key, minute)
  local flat = redis.call('HGETALL', key)
  local folded, gone = {}, {}
  for i = 1, #flat, 2 do
    local kind, m = string.match(flat[i], '^(%a):(%d+)$')
    if kind and tonumber(m) <= minute - METRICS_MINUTES then
      folded[kind] = (folded[kind] or 0) + tonumber(flat[i + 1])
      gone[#gone + 1] = flat[i]
    end
  end
  for kind, count in pairs(folded) do redis.call('HINCRBY', key, kind, count) end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
end

-- metrics_count(q, kind, now): count one outcome of queue q (queue_keys): kind 'c'
-- (completed) or 'f' (failed for good), at `now` (ms).
local function metrics_count(q, kind, now)
  local key = q.head .. 'metrics'
  local minute = math.floor(now / 60000)
  if redis.call('HINCRBY', key, kind .. ':' .. int_text(minute), '1') == 1 then
    metrics_fold(key, minute)
  end
end
