-- A job's log lines (job.log) live in the LIST '<prefix>:{<queue>}:logs:<id>' beside its hash
-- '<prefix>:{<queue>}:job:<id>', in the same hash tag. Whatever deletes a job's hash deletes
-- its logs (drop_job); dead-lettering moves them with the job (move_logs), and replay gives the
-- new job a copy, since the dead letter stays in the store (copy_logs).

-- logs_key(job_key): the logs of the job whose hash is `job_key`. A prefix holds no braces
-- and a queue name none but its hash tag's, and nothing after the tag holds a ':' (a tagged
-- name such as '{payments}-dlq' has none after its '}'), so the first ':' after the first '}'
-- ends the '<prefix>:{<queue>}:' part; 'job:' follows it.
local function logs_key(job_key)
  local cut = string.find(job_key, ':', string.find(job_key, '}', 1, true), true)
  return string.sub(job_key, 1, cut) .. 'logs:' .. string.sub(job_key, cut + 5)
end

-- drop_job(job_key): delete a job's hash and its logs.
local function drop_job(job_key)
  redis.call('DEL', job_key, logs_key(job_key))
end

-- drop_jobs(job_prefix, ids): delete the hashes and logs of jobs `ids`, in one command.
local function drop_jobs(job_prefix, ids)
  if #ids == 0 then return end
  local keys = {}
  for _, id in ipairs(ids) do
    local key = job_prefix .. id
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
