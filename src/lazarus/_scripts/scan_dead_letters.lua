--[[
  scan_dead_letters: read a window of a dead letter queue's waiting list, oldest first, and
  return the dead letters that match a filter. Reads only; bulk replay and purge call it
  batch by batch so that no call holds Redis for long.

  KEYS[1]  wait             the dead letter queue's waiting list
  KEYS[2]  job_prefix

  ARGV[1]  skip             entries to skip from the oldest end (those already passed over)
  ARGV[2]  window           entries to read
  ARGV[3]  name             exact job name, '' for any
  ARGV[4]  failed_reason    lower-case literal substring of the failure reason, '' for any
  ARGV[5]  source_queue     exact, '' for any
  ARGV[6]  error_type       exact exception class name, '' for any
  ARGV[7]  since            dead-lettered at or after (ms), '' for any
  ARGV[8]  until            dead-lettered at or before (ms), '' for any
  ARGV[9]  reason           exact dead-letter reason, '' for any
  ARGV[10] text             literal substring of the payload, '' for any
  ARGV[11] name_prefix      the job name starts with this, '' for any
  ARGV[12] detail           '1' to return name, error type, reason and time with each match

  Returns: {read, matches}: how many entries the window held, and {id, source_queue} for
           each match, oldest first ({id, source_queue, name, error_type, reason,
           dead_lettered_at} with detail). Entries without dead-letter metadata never match.
  Events:  none
]]
local skip = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local name, reason_part, source, error_type = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local since, till = tonumber(ARGV[7]), tonumber(ARGV[8])
local dl_reason, text, name_prefix = ARGV[9], ARGV[10], ARGV[11]
local ids = redis.call('LRANGE', KEYS[1], -(skip + window), -(skip + 1))
local matches = {}
for i = #ids, 1, -1 do
  local id = ids[i]
  local f = redis.call('HMGET', KEYS[2] .. id, 'dlq:sourceQueue', 'name', 'dlq:failedReason',
    'dlq:errorType', 'dlq:deadLetteredAt', 'dlq:reason')
  local ok = f[1] ~= false
  if ok and name ~= '' then ok = f[2] == name end
  if ok and name_prefix ~= '' then
    ok = string.sub(f[2] or '', 1, #name_prefix) == name_prefix
  end
  if ok and source ~= '' then ok = f[1] == source end
  if ok and error_type ~= '' then ok = f[4] == error_type end
  if ok and dl_reason ~= '' then ok = f[6] == dl_reason end
  if ok and (since or till) then
    local at = tonumber(f[5]) or 0
    ok = (not since or at >= since) and (not till or at <= till)
  end
  if ok and reason_part ~= '' then
    ok = string.find(string.lower(f[3] or ''), reason_part, 1, true) ~= nil
  end
  if ok and text ~= '' then
    local data = redis.call('HGET', KEYS[2] .. id, 'data') or ''
    ok = string.find(data, text, 1, true) ~= nil
  end
  if ok then
    if ARGV[12] == '1' then
      matches[#matches + 1] = {id, f[1], f[2] or '', f[4] or '', f[6] or '', f[5] or '0'}
    else
      matches[#matches + 1] = {id, f[1]}
    end
  end
end
return {#ids, matches}
