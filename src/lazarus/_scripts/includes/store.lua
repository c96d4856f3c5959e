-- The dead letter store of one dead letter queue: every key lives under the store prefix
-- `dl` = '<prefix>:{<dlq>}:dl:' (the queue's own hash tag), see docs/redis-keys.md:
--   dl .. 'i:<f>:<value>'     ZSET  the ids whose field f has that value, in arrival order:
--                                   score = dead-lettered at (ms) * 1000 + the sequence mod 1000
--   dl .. 'seq'               STRING the sequence, which orders one millisecond's arrivals
--   dl .. 'v:<f>'             ZSET  the distinct values of field f held (every field),
--                                   score 0: lexical order; a count reads the combinations
--                                   it needs by name from these
--   dl .. 'c'                 HASH  how many dead letters have each combination of the five
--                                   values; any subset's count is a sum of these
--   dl .. 'o'                 HASH  original job id -> dead letter id
--   dl .. 'x', dl .. 'x:on'           the outbox (includes/outbox.lua)
-- Fields f: q source queue, n job name, e error type, r reason, s status. Every dead letter has
-- exactly one status, so the status indexes ('i:s:<status>') partition the store: together
-- they are its arrival order, and a dead letter is in the store when it is in its status's.
-- @include outbox
-- @include json_append
-- @include numbers
local STORE_CODES = {'q', 'n', 'e', 'r', 's'}
local STORE_FIELDS = {'dlq:sourceQueue', 'name', 'dlq:errorType', 'dlq:reason', 'dlq:status',
  'dlq:deadLetteredAt', 'dlq:originalJobId'}

-- store_head(dl): what every key of the store's own queue begins with ('<prefix>:{<queue>}:',
-- queue_keys's `head`): the store prefix `dl` less its 'dl:'. A dead letter's hash is
-- store_head(dl) .. 'job:' .. its id.
local function store_head(dl)
  return string.sub(dl, 1, -4)
end

-- store_values(key): the indexed values of a dead letter hash ({q, n, e, r, s}), when it was
-- dead-lettered, and its original job id; nil when the hash is not a dead letter.
local function store_values(key)
  local f = redis.call('HMGET', key, unpack(STORE_FIELDS))
  if not f[1] then return nil end
  local values = {f[1], f[2] or '', f[3] or '', f[4] or '', f[5] or 'pending'}
  return values, tonumber(f[6]) or 0, f[7] or ''
end

-- store_combination(values, status): the field of the count hash for this combination of the
-- five values (with `status` in place of the fifth, if given): 'f<byte length>:<value>' per
-- field, in field order. store_combination_head(values) is its part for the first four, and
-- store_combination_of(head, status) the field of that head and a status.
local function store_combination_head(values)
  return 'q' .. int_text(#values[1]) .. ':' .. values[1] .. 'n' .. int_text(#values[2]) .. ':'
    .. values[2] .. 'e' .. int_text(#values[3]) .. ':' .. values[3] .. 'r'
    .. int_text(#values[4]) .. ':' .. values[4]
end

local function store_combination_of(head, status)
  return head .. 's' .. int_text(#status) .. ':' .. status
end

local function store_combination(values, status)
  return store_combination_of(store_combination_head(values), status or values[5])
end

-- store_index(dl, id, values, score, origin): write dead letter `id` (its `values` and
-- `origin` as store_values reads them) into every index at `score`, and count it.
local function store_index(dl, id, values, score, origin)
  for i = 1, 5 do
    redis.call('ZADD', dl .. 'i:' .. STORE_CODES[i] .. ':' .. values[i], score, id)
  end
  -- A combination held already means each of its values is in its 'v:' set.
  if redis.call('HINCRBY', dl .. 'c', store_combination(values), '1') == 1 then
    for i = 1, 5 do redis.call('ZADD', dl .. 'v:' .. STORE_CODES[i], 'NX', '0', values[i]) end
  end
  if origin ~= '' then redis.call('HSET', dl .. 'o', origin, id) end
end

-- store_add(dl, id, values, at, origin): index dead letter `id` (its hash written already),
-- dead-lettered at `at` (ms). The sequence orders dead letters of the same millisecond.
local function store_add(dl, id, values, at, origin)
  store_index(dl, id, values, int_text(at * 1000 + redis.call('INCR', dl .. 'seq') % 1000),
    origin)
  outbox_append(dl, 'dead-lettered', id, at, values[5], nil, values)
end

-- store_remove(dl, id, key, cause, now): take dead letter `id` (hash `key`, still present)
-- out of every index, because of `cause` (purged, pruned, removed, cleaned, claimed: the
-- outbox's event; `now` may be ''; false when the dead letter is re-indexed at once and stays,
-- which is no event). Returns whether it was in the store, and its values (nil
-- when `key` is not a dead letter).
local function store_remove(dl, id, key, cause, now)
  local values, _, origin = store_values(key)
  if not values then return false, nil end
  if redis.call('ZREM', dl .. 'i:s:' .. values[5], id) == 0 then return false, values end
  for i = 1, 4 do
    redis.call('ZREM', dl .. 'i:' .. STORE_CODES[i] .. ':' .. values[i], id)
  end
  local combination = store_combination(values)
  -- While its combination is held, another dead letter keeps each of its values.
  if redis.call('HINCRBY', dl .. 'c', combination, '-1') <= 0 then
    redis.call('HDEL', dl .. 'c', combination)
    for i = 1, 5 do
      if redis.call('EXISTS', dl .. 'i:' .. STORE_CODES[i] .. ':' .. values[i]) == 0 then
        redis.call('ZREM', dl .. 'v:' .. STORE_CODES[i], values[i])
      end
    end
  end
  if origin ~= '' and redis.call('HGET', dl .. 'o', origin) == id then
    redis.call('HDEL', dl .. 'o', origin)
  end
  if cause then outbox_append(dl, cause, id, now, cause, key) end
  return true, values
end

-- store_statuses(dl): the index key of every status that holds dead letters.
local function store_statuses(dl)
  local keys = {}
  for _, status in ipairs(redis.call('ZRANGE', dl .. 'v:s', '0', '-1')) do
    keys[#keys + 1] = dl .. 'i:s:' .. status
  end
  return keys
end

-- store_json(value): `value` (a string, or nil/false/'' for none) as JSON text. Only short texts
-- lazarus writes itself (statuses, actors, notes, queue names) pass here, never a payload: a
-- call meets few of them, so each is encoded once per call.
local store_json_of = {}
local function store_json(value)
  if value == nil or value == false or value == '' then return 'null' end
  local text = store_json_of[value]
  if not text then
    text = cjson.encode(value)
    store_json_of[value] = text
  end
  return text
end

-- store_timeline_entry(now, from, status, actor, note, extra): one entry of a dead letter's
-- timeline, as JSON text: {at, from, to, actor, note} and the pairs of `extra`, if given.
local function store_timeline_entry(now, from, status, actor, note, extra)
  local parts = {'{"at":' .. int_text(now), '"from":' .. store_json(from),
    '"to":' .. store_json(status),
    '"actor":' .. store_json(actor), '"note":' .. store_json(note)}
  if extra then
    for i = 1, #extra, 2 do parts[#parts + 1] = store_json(extra[i]) .. ':' .. extra[i + 1] end
  end
  return table.concat(parts, ',') .. '}'
end

-- store_set_status(dl, id, key, status, now, actor, note, extra): move dead letter `id` (hash
-- `key`) from its status index to 'i:s:<status>', keeping its arrival score; keep the count
-- hash and 'v:s'; set dlq:status and dlq:statusAt; append {at, from, to, actor, note} (and the
-- pairs of `extra`, a list {name, JSON text, ...}, if given) to the JSON array dlq:timeline.
-- Returns the previous status, or false when `id` is not in the store. The one place a dead
-- letter's status changes: every transition, of every script, goes through here. A change to
-- the same status moves nothing but is still recorded (an archive note, for instance).
local function store_set_status(dl, id, key, status, now, actor, note, extra)
  local values = store_values(key)
  if not values then return false end
  local from = values[5]
  local score = redis.call('ZSCORE', dl .. 'i:s:' .. from, id)
  if not score then return false end
  if from ~= status then
    redis.call('ZREM', dl .. 'i:s:' .. from, id)
    redis.call('ZADD', dl .. 'i:s:' .. status, score, id)
    local old = store_combination(values)
    if redis.call('HINCRBY', dl .. 'c', old, '-1') <= 0 then
      redis.call('HDEL', dl .. 'c', old)
      if redis.call('EXISTS', dl .. 'i:s:' .. from) == 0 then
        redis.call('ZREM', dl .. 'v:s', from)
      end
    end
    values[5] = status
    if redis.call('HINCRBY', dl .. 'c', store_combination(values), '1') == 1 then
      redis.call('ZADD', dl .. 'v:s', 'NX', '0', status)
    end
  end
  redis.call('HSET', key, 'dlq:status', status, 'dlq:statusAt', int_text(now))
  json_append(key, 'dlq:timeline', store_timeline_entry(now, from, status, actor, note, extra))
  outbox_append(dl, status, id, now, status)
  return from
end
