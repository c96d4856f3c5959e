-- json_append(key, field, item): append the JSON text `item` to the JSON array stored in hash
-- field `field`, without decoding anything (cjson would alter user data and turn [] into {}).
-- json_appended(current, item): the JSON array text `current` (nil or '' for none) with the
-- JSON text `item` appended.
local function json_appended(current, item)
  if not current or current == '' or current == '[]' then return '[' .. item .. ']' end
  return string.sub(current, 1, -2) .. ',' .. item .. ']'
end

local function json_append(key, field, item)
  redis.call('HSET', key, field, json_appended(redis.call('HGET', key, field), item))
end
