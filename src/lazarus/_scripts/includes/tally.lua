-- @include numbers
-- A tally: what a bulk run did, counted by the script calls that did it, atomically with the
-- work (<store prefix>tally:<name>, a STRING in the dead letter queue's slot). Every call of
-- the run adds to it, from whichever process sends it, so a run resumed elsewhere after its
-- process died (dead_letter/bulk.py) counts what the dead process did and never reported.
-- A tally goes TALLY_KEEP_MS after its last count.
local TALLY_KEEP_MS = 86400000

-- tally_add(dl, name, n): add `n` to tally `name` of the store whose keys begin with `dl`
-- ('' names no tally).
local function tally_add(dl, name, n)
  if name == '' or n == 0 then return end
  local key = dl .. 'tally:' .. name
  redis.call('INCRBY', key, int_text(n))
  redis.call('PEXPIRE', key, TALLY_KEEP_MS)
end
