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

-- logs_key(job_key): the logs of the job whose hash is `job_key`.
local function logs_key(job_key)
  return beside(job_key, 'logs')
end

-- A re-send comes within seconds (the client's retry policy: three retries, each at most a
-- connect timeout of 5 s after the last); the window leaves room for slower connects.
local RESEND_WINDOW_MS = 30000

-- bury(job_key, now, added): leave the tombstone of the job hash `job_key`, about to be
-- deleted, when it was added less than RESEND_WINDOW_MS before `now` (ms; nil: Redis's
-- clock, for the calls given none); `added` is its timestamp field when the caller read it
-- already (else it is read here).
local function bury(job_key, now, added)
  added = added or redis.call('HGET', job_key, 'timestamp')
  local at = tonumber(added)
  if not at then return end
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  if now - at < RESEND_WINDOW_MS then
    redis.call('SET', beside(job_key, 'gone'), added, 'PX', int_text(RESEND_WINDOW_MS))
  end
end

-- added_before(job_key, added): whether the job hash `job_key` was added at `added` (ms) and
-- deleted since (its tombstone says so).
local function added_before(job_key, added)
  return tonumber(redis.call('GET', beside(job_key, 'gone'))) == added
end

-- drop_job(job_key, now, added): delete a job's hash and its logs, leaving its tombstone
-- (bury; `now` and `added` as there).
local function drop_job(job_key, now, added)
  bury(job_key, now, added)
  redis.call('DEL', job_key, logs_key(job_key))
end

-- drop_jobs(job_prefix, ids, now): delete the hashes and logs of jobs `ids`, in one command,
-- leaving their tombstones.
local function drop_jobs(job_prefix, ids, now)
  if #ids == 0 then return end
  local keys = {}
  for _, id in ipairs(ids) do
    local key = job_prefix .. id
    bury(key, now)
    keys[#keys + 1] = key
    keys[#keys + 1] = logs_key(key)
  end
  redis.call('DEL', unpack(keys))
end

-- move_logs(from_key, to_key): give the logs of job hash `from_key` to job hash `to_key`.
local function move_logs(from_key, to_key)
  local from = logs_key(from_key)
  if redis.call('EXISTS', from) == 1 then redis.call('RENAME', from, logs_key(to_key)) end
end

-- copy_logs(from_key, to_key): give job hash `to_key` a copy of the logs of `from_key`, which
-- keeps its own. When the copy comes back (the replayed job dead-lettered into the same
-- record), move_logs replaces the record's logs with it: the old lines and the new ones.
-- (COPY of a key that does not exist copies nothing.)
local function copy_logs(from_key, to_key)
  redis.call('COPY', logs_key(from_key), logs_key(to_key), 'REPLACE')
end
