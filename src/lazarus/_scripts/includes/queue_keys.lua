-- queue_keys(first): the ten keys of one queue, passed as KEYS[first .. first + 9] in the
-- order of QueueKeys.group in _keys.py. `head` is what every key of the queue begins with
-- ('<prefix>:{<queue>}:'), and `dl` the queue's dead letter store prefix ('<head>dl:'), both
-- derived from job_prefix ('<head>job:'): the same hash tag, like a job's key.
local function queue_keys(first)
  local head = string.sub(KEYS[first + 9], 1, -5)
  return {
    wait = KEYS[first], prioritized = KEYS[first + 1], pc = KEYS[first + 2],
    delayed = KEYS[first + 3], active = KEYS[first + 4], leases = KEYS[first + 5],
    marker = KEYS[first + 6], meta = KEYS[first + 7], events = KEYS[first + 8],
    job_prefix = KEYS[first + 9], head = head, dl = head .. 'dl:',
  }
end
