-- @include store
-- @include job_logs
-- Batched store changes, for the scripts that act on many dead letters in one call (bulk
-- purge and replay). store_remove and store_set_status write every index and count at once,
-- one command per dead letter and index; here a call gathers those writes and sends them
-- (store_flush) as one variadic command per key: ZREM/ZADD per index, HINCRBY per
-- combination, the 'v:' sets checked once per value, and the keys to UNLINK. The result is the
-- same as the one-by-one functions'; what differs is the work per dead letter, which is what
-- bounds bulk operations (each redis.call from Lua costs about as much as the command itself).
--
-- A batch writes what it gathered every STORE_STEP dead letters, inside the caller's loop, so
-- that the loop's time budget covers those writes and what is left for the end of the call
-- (the last store_flush) stays small, whatever the indexes cost. Until a batch is written, the
-- indexes still show what the call has changed as it was: a caller that could meet one dead
-- letter twice asks store_seen first.
local STORE_STEP = 32

-- store_batch_clear(batch): forget the changes gathered (written already); `seen` stays.
local function store_batch_clear(batch)
  batch.zrem, batch.zadd, batch.counts, batch.left = {}, {}, {}, {}
  batch.entered, batch.origins, batch.unlink, batch.pending = {}, {}, {}, 0
end

-- store_batch(dl): an empty batch of changes to the store `dl`.
local function store_batch(dl)
  local batch = {dl = dl, seen = {}, head = store_head(dl)}
  store_batch_clear(batch)
  return batch
end

local function store_push(lists, key, a, b)
  local list = lists[key]
  if not list then
    list = {}
    lists[key] = list
  end
  list[#list + 1] = a
  if b ~= nil then list[#list + 1] = b end
end

local function store_count(batch, values, delta)
  local combination = store_combination(values)
  batch.counts[combination] = (batch.counts[combination] or 0) + delta
end

-- store_seen(batch, id): whether this call changed dead letter `id` already.
local function store_seen(batch, id)
  return batch.seen[id] == true
end

-- store_held(dl, ids, statuses): which of `ids` are in the store in one of `statuses` (a set
-- {[status] = true}; nil for any), with their arrival scores: {[status] = {[id] = score}}. One
-- ZMSCORE per status index that holds dead letters costs a fraction of a ZSCORE per id.
local function store_held(dl, ids, statuses)
  local held = {}
  for _, status in ipairs(redis.call('ZRANGE', dl .. 'v:s', '0', '-1')) do
    if not statuses or statuses[status] then
      local in_status = {}
      local scores = redis.call('ZMSCORE', dl .. 'i:s:' .. status, unpack(ids))
      for i = 1, #ids do
        if scores[i] then in_status[ids[i]] = scores[i] end
      end
      held[status] = in_status
    end
  end
  return held
end

-- store_batch_remove(batch, id, key, values, origin, cause, now): as store_remove, for dead
-- letter `id` (hash `key`, its `values` and `origin` read by the caller with store_values, which
-- has found it in its status's index: store_held), with the index writes deferred. Returns
-- false, changing nothing, when this call removed it already.
local function store_batch_remove(batch, id, key, values, origin, cause, now)
  local dl = batch.dl
  if batch.seen[id] then return false end
  batch.seen[id] = true
  for i = 1, 5 do store_push(batch.zrem, dl .. 'i:' .. STORE_CODES[i] .. ':' .. values[i], id) end
  store_count(batch, values, -1)
  for i = 1, 5 do batch.left[STORE_CODES[i] .. values[i]] = true end
  if origin ~= '' then store_push(batch.origins, 'list', origin, id) end
  if cause then outbox_append(dl, cause, id, now, cause, key) end
  return true
end

-- store_batch_set_status(batch, id, key, values, score, status, now, who, timeline, fields):
-- as store_set_status, for dead letter `id` (hash `key`; `values` as store_values reads them;
-- `score` its arrival score, read by the caller in its status's index), with the index and
-- count writes deferred. `who` is {actor, note, extra} as store_set_status takes them,
-- `timeline` the dead letter's current dlq:timeline, and `fields` more hash fields to set
-- ({name, value, ...}) in the same HSET. Returns the previous status.
local function store_batch_set_status(batch, id, key, values, score, status, now, who, timeline,
                                      fields)
  local dl = batch.dl
  local from = values[5]
  batch.seen[id] = true
  if from ~= status then
    store_push(batch.zrem, dl .. 'i:s:' .. from, id)
    store_push(batch.zadd, dl .. 'i:s:' .. status, score, id)
    local head, counts = store_combination_head(values), batch.counts
    local left, entered = store_combination_of(head, from), store_combination_of(head, status)
    counts[left] = (counts[left] or 0) - 1
    counts[entered] = (counts[entered] or 0) + 1
    values[5] = status
    batch.left['s' .. from] = true
    batch.entered[status] = true
  end
  local entry = store_timeline_entry(now, from, status, who[1], who[2], who[3])
  redis.call('HSET', key, 'dlq:status', status, 'dlq:statusAt', int_text(now),
    'dlq:timeline', json_appended(timeline, entry), unpack(fields))
  outbox_append(dl, status, id, now, status)
  return from
end

-- store_flush(batch): write the batch's deferred changes, then the keys to UNLINK.
local function store_flush(batch)
  local dl = batch.dl
  for key, ids in pairs(batch.zrem) do
    for i = 1, #ids, 1000 do redis.call('ZREM', key, unpack(ids, i, math.min(i + 999, #ids))) end
  end
  for key, pairs_ in pairs(batch.zadd) do
    for i = 1, #pairs_, 1000 do
      redis.call('ZADD', key, unpack(pairs_, i, math.min(i + 999, #pairs_)))
    end
  end
  -- The counts (a combination of no dead letter goes). One HINCRBY per count costs Redis
  -- less than reading them all and writing them back, which had Lua print each new value.
  local gone = {}
  for combination, delta in pairs(batch.counts) do
    if delta ~= 0 and redis.call('HINCRBY', dl .. 'c', combination, int_text(delta)) <= 0 then
      gone[#gone + 1] = combination
    end
  end
  for i = 1, #gone, 1000 do
    redis.call('HDEL', dl .. 'c', unpack(gone, i, math.min(i + 999, #gone)))
  end
  for status in pairs(batch.entered) do redis.call('ZADD', dl .. 'v:s', 'NX', '0', status) end
  for coded in pairs(batch.left) do
    local code, value = string.sub(coded, 1, 1), string.sub(coded, 2)
    if redis.call('EXISTS', dl .. 'i:' .. code .. ':' .. value) == 0 then
      redis.call('ZREM', dl .. 'v:' .. code, value)
    end
  end
  local origins = batch.origins['list']
  if origins then
    for first = 1, #origins, 2000 do
      local names = {}
      for i = first, math.min(first + 1999, #origins), 2 do names[#names + 1] = origins[i] end
      local holders = redis.call('HMGET', dl .. 'o', unpack(names))
      local stale = {}
      for i, holder in ipairs(holders) do
        if holder == origins[first + i * 2 - 1] then stale[#stale + 1] = names[i] end
      end
      if #stale > 0 then redis.call('HDEL', dl .. 'o', unpack(stale)) end
    end
  end
  local unlink = batch.unlink
  for i = 1, #unlink, 1000 do
    redis.call('UNLINK', unpack(unlink, i, math.min(i + 999, #unlink)))
  end
  store_batch_clear(batch)
end

-- store_step(batch, dropped): count one more dead letter changed in `batch`; `dropped`, when
-- given, is its id: its hash and logs are deleted once it is out of the indexes (a purge).
-- Every STORE_STEP of them, write what the batch gathered. A caller's loop calls it once per
-- dead letter changed.
local function store_step(batch, dropped)
  if dropped then
    local unlink = batch.unlink
    unlink[#unlink + 1] = job_side(batch.head, 'job', dropped)
    unlink[#unlink + 1] = job_side(batch.head, 'logs', dropped)
  end
  batch.pending = batch.pending + 1
  if batch.pending >= STORE_STEP then store_flush(batch) end
end
