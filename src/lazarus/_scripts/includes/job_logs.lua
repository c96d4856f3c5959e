-- @include numbers
-- A job's log lines (job.log) live in the LIST '<prefix>:{<queue>}:logs:<id>' beside its hash
-- '<prefix>:{<queue>}:job:<id>', in the same hash tag. Whatever deletes a job's hash deletes
-- its logs (drop_job); dead-lettering moves them with the job (move_logs), and replay gives the
-- new job a copy, since the dead letter stays in the store (copy_logs).
--
-- A job deleted within RESEND_WINDOW_MS of its add leaves a tombstone beside it, the STRING
-- '<prefix>:{<queue>}:gone:<id>' holding its add time (the hash's timestamp), for
-- RESEND_WINDOW_MS (bury). An add sent again after a dropped connection lost its first reply
-- finds there the job its first send added, ran and deleted meanwhile, and adds nothing
-- (add_jobs.lua); a new add of the id is not sent again, and adds it.

-- beside(job_key, kind): the key of kind `kind` ('logs', 'gone') beside the job hash
-- `job_key`. A prefix holds no braces and a queue name none but its hash tag's, and nothing
-- after the tag holds a ':' (a tagged name such as '{payments}-dlq' has none after its '}'),
-- so the first ':' after the first '}' ends the '<prefix>:{<queue>}:' part; 'job:' follows it.
local function beside(job_key, kind)
  local cut = string.find(job_key, ':', string.find(job_key, '}', 1, true), true)
  return string.sub(job_key, 1, cut) .. kind .. ':' .. string.sub(job_key, cut + 5)
end

-- job_side(head, kind, id): the key of kind `kind` beside the hash of job `id` of the queue whose
-- keys begin with `head` ('<prefix>:{<queue>}:', queue_keys's `head`): one new string, where
-- beside, which must find the id in the key first, makes three and calls four string
-- functions (each new string a Lua allocation, and garbage). The hot paths know the id.
local function job_side(head, kind, id)
  return head .. kind .. ':' .. id
end

-- logs_key(job_key): the logs of the job whose hash is `job_key`.
local function logs_key(job_key)
  return beside(job_key, 'logs')
end

-- A re-send comes within seconds (the client's retry policy: three retries, each at most a
-- connect timeout of 5 s after the last); the window leaves room for slower connects.
local RESEND_WINDOW_MS = 30000

-- bury(q, id, now, added): leave the tombstone of job `id` of queue q (queue_keys), about to be
-- deleted, when it was added less than RESEND_WINDOW_MS before `now` (ms; nil: Redis's
-- clock, for the calls given none); `added` is its timestamp field when the caller read it
-- already (else it is read here).
local function bury(q, id, now, added)
  added = added or redis.call('HGET', q.job_prefix .. id, 'timestamp')
  local at = tonumber(added)
  if not at then return end
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if now - at < RESEND_WINDOW_MS then
    redis.call('SET', job_side(q.head, 'gone', id), added, 'PX', int_text(RESEND_WINDOW_MS))
  end
end

-- added_before(job_key, added): whether the job hash `job_key` was added at `added` (ms) and
-- deleted since (its tombstone says so).
local function added_before(job_key, added)
  return tonumber(redis.call('GET', beside(job_key, 'gone'))) == added
end

-- drop_job(q, id, now, added): delete the hash and the logs of job `id` of queue q, leaving its
-- tombstone (bury; `now` and `added` as there).
local function drop_job(q, id, now, added)
  bury(q, id, now, added)
  redis.call('DEL', q.job_prefix .. id, job_side(q.head, 'logs', id))
end

-- drop_jobs(q, ids, now): delete the hashes and logs of jobs `ids` of queue q, in one command,
-- leaving their tombstones.
local function drop_jobs(q, ids, now)
  if #ids == 0 then return end
  local keys = {}
  for _, id in ipairs(ids) do
    bury(q, id, now)
    keys[#keys + 1] = q.job_prefix .. id
    keys[#keys + 1] = job_side(q.head, 'logs', id)
  end
  redis.call('DEL', unpack(keys))
end

-- move_logs(from_logs, to_logs): the logs at key `from_logs` become those at `to_logs` (the
-- logs keys of two jobs).
local function move_logs(from_logs, to_logs)
  if redis.call('EXISTS', from_logs) == 1 then redis.call('RENAME', from_logs, to_logs) end
end

-- copy_logs(from_logs, to_logs): give the job whose logs key is `to_logs` a copy of the logs at
-- `from_logs`, which stay. When the copy comes back (the replayed job dead-lettered into the
-- same record), move_logs replaces the record's logs with it: the old lines and the new ones.
-- (COPY of a key that does not exist copies nothing.)
local function copy_logs(from_logs, to_logs)
  redis.call('COPY', from_logs, to_logs, 'REPLACE')
end
