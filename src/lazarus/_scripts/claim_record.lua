--[[
  claim_record: none -> claimed, the first write of an OJS job (ojs/records.py): the job's
  OJS record, whole, which claims its id in its queue; or an orphan record -> claimed again.

  A record is written before its job is added to the engine, in another call, so a server
  that dies between the two leaves a record whose job was never added. A record written with
  `adding` set keeps that field (its write time, ms) until the add is known to have happened
  (Records.added). Such a record is an orphan, and a new claim replaces it, when all hold:
  - its `adding` is at least orphan_after_ms old (an enqueue still under way is not one);
  - the engine has no job of that id, and no tombstone of one deleted soon after its add
    (includes/job_logs.lua);
  - it records no terminal state.
  Anything else keeps the record and refuses the claim.

  KEYS[1]  record           <prefix>:{<queue>}:ojs:<id>
  KEYS[2]  job              the job's hash
  KEYS[3]  gone             the job's tombstone

  ARGV[1]  now              ms
  ARGV[2]  orphan_after_ms  how old an orphan's `adding` must be
  ARGV[3]  adding           '1': mark the record as awaiting its job's add; '': do not (a
                            record written for a job the engine holds already)
  ARGV[4..] field, value    the record's fields ('created_at' among them)

  Returns: 0 when the id is taken (nothing written), 1 when the record was written, 2 when
           it replaced an orphan.
  Events:  none
]]

local now = tonumber(ARGV[1])
local found = redis.call('HMGET', KEYS[1], 'created_at', 'adding', 'state')
local reply = 1
if found[1] then
  local adding = tonumber(found[2])
  if not adding or found[3] or now - adding < tonumber(ARGV[2])
      or redis.call('EXISTS', KEYS[2], KEYS[3]) > 0 then
    return 0
  end
  redis.call('DEL', KEYS[1])
  reply = 2
end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
if ARGV[3] == '1' then redis.call('HSET', KEYS[1], 'adding', ARGV[1]) end
return reply
