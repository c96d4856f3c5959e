-- json_append(key, field, item): append the JSON text `item` to the JSON array stored in hash
-- field `field`, without decoding anything (cjson would alter user data and turn [] into {}).
local function json_append(key, field, item)
  local current = redis.call('HGET', key, field)
  if not current or current == '' or current == '[]' then
    redis.call('HSET', key, field, '[' .. item .. ']')
  else
    redis.call('HSET', key, field, string.sub(current, 1, -2) .. ',' .. item .. ']')
  end
end
