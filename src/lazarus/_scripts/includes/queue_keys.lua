-- queue_keys(first): the ten keys of one queue, passed as KEYS[first .. first + 9] in the
-- order of QueueKeys.group in _keys.py. `dl` is the queue's dead letter store prefix
-- ('<prefix>:{<queue>}:dl:'), derived from job_prefix: the same hash tag, like a job's key.
local function queue_keys(first)
  return {
    wait = KEYS[first], prioritized = KEYS[first + 1], pc = KEYS[first + 2],
    delayed = KEYS[first + 3], active = KEYS[first + 4], leases = KEYS[first + 5],
    marker = KEYS[first + 6], meta = KEYS[first + 7], events = KEYS[first + 8],
    job_prefix = KEYS[first + 9],
    dl = string.sub(KEYS[first + 9], 1, -5) .. 'dl:',
  }
end
