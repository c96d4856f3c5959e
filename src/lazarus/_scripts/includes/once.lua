-- @include numbers
-- Reply memos: a state-changing call that Redis ran but whose reply a dropped connection lost
-- is sent again by the client; the memo lets the second run answer as the first did instead of
-- running again. One memo per worker slot (KEYS: <prefix>:{<queue>}:reply:<worker>:<slot>),
-- overwritten by the slot's next call and expiring on its own, so memory stays bounded:
--   '<job id> <claim> <job id> <claim> ...\n<call id>'
-- the jobs the call claimed, each by its id and what ends its lock token after the call's
-- token base ('<token_base>:<claim>', the claim being '<attempt>:<event id>':
-- includes/lock_token.lua), then the call's id. Job ids and claims hold no whitespace, so the
-- first newline ends the jobs; a call id may hold anything.
-- Needs the claim include (claimed_reply, next_due).

-- memo_save(key, call_id, jobs, token_base, ttl_ms): remember that call_id claimed `jobs`
-- (claimed_reply tables).
local function memo_save(key, call_id, jobs, token_base, ttl_ms)
  local parts = {}
  for i, job in ipairs(jobs) do
    parts[i] = job[1] .. ' ' .. string.sub(job[2], #token_base + 2)
  end
  redis.call('SET', key, table.concat(parts, ' ') .. '\n' .. call_id, 'PX', int_text(ttl_ms))
end

-- memo_replay(q, key, call_id, token_base): nil unless the memo is call_id's; else the jobs
-- call_id claimed, rebuilt as claimed_reply, without those whose lock has moved on since (a
-- stall sweep took them back).
local function memo_replay(q, key, call_id, token_base)
  local memo = redis.call('GET', key)
  if not memo then return nil end
  local cut = string.find(memo, '\n', 1, true)
  if not cut or string.sub(memo, cut + 1) ~= call_id then return nil end
  local jobs = {}
  for id, claim in string.gmatch(string.sub(memo, 1, cut - 1), '(%S+) (%S+)') do
    local job_key = q.job_prefix .. id
    local token = token_base .. ':' .. claim
    if redis.call('HGET', job_key, 'lockToken') == token then
      jobs[#jobs + 1] = claimed_reply(job_key, id, token)
    end
  end
  return jobs
end

-- An outcome script's call id is '<job id> <lock token>': a token names one claim of one job,
-- in this life of its id or any other.

-- outcome_done(q, key, id, token, job, token_base, lock_ms): the reply of an outcome script
-- that finished job `id` held under `token` and claimed `job` (or false: then the room the
-- job left may be a worker's to take, includes/claim.lua's wake_capped); remembered for
-- twice the lease, long enough for the worker to send it again before it gives up.
local function outcome_done(q, key, id, token, job, token_base, lock_ms)
  if not job then wake_capped(q) end
  memo_save(key, id .. ' ' .. token, job and {job} or {}, token_base, 2 * lock_ms)
  return {0, next_due(q), job}
end

-- outcome_refused(q, key, id, token, code, token_base): the reply of an outcome script whose
-- lock check failed with `code`: when this call is a second run of one that finished the job
-- (the memo is its call's), the first run's reply; else {code}.
local function outcome_refused(q, key, id, token, code, token_base)
  local jobs = memo_replay(q, key, id .. ' ' .. token, token_base)
  if not jobs then return {code} end
  return {0, next_due(q), jobs[1] or false}
end
