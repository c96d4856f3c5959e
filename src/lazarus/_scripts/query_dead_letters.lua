--[[
  query_dead_letters: walk a dead letter store in arrival order from a cursor and return the
  dead letters that match a filter. Reads only. The walk follows the smallest index that the
  exact filters allow (or the index of every job name that starts with name_prefix), checks
  the other filters on each entry, and stops at `limit` matches or when its budget of entries
  or bytes examined is spent, so no call holds Redis for long whatever the data; the caller
  resumes from the returned cursor.

  KEYS[1]  dl               the store prefix '<prefix>:{<dlq>}:dl:'
  KEYS[2]  job_prefix

  ARGV[1]  order            'desc' (newest first) or 'asc'
  ARGV[2]  cursor_score     the position walked to so far ('' to start at the beginning)
  ARGV[3]  cursor_id
  ARGV[4]  limit            matches wanted
  ARGV[5]  max_entries      entries to examine at most
  ARGV[6]  max_bytes        bytes of failure reasons and payloads to examine at most
  ARGV[7]  since            lowest store score (dead-lettered at ms * 1000), '' for any
  ARGV[8]  until            highest store score, '' for any
  ARGV[9]  source_queue     exact values, '' for any
  ARGV[10] name
  ARGV[11] error_type
  ARGV[12] reason
  ARGV[13] status          one status, or several comma-separated (any of them)
  ARGV[14] name_prefix      the job name starts with this, '' for any
  ARGV[15] failed_reason    lower-case literal substring of the failure reason, '' for any
  ARGV[16] text             literal substring of the payload, '' for any
  ARGV[17] detail           '1' to return each match's fields, 's' its source queue, '' for
                            ids only

  Returns: {done, cursor_score, cursor_id, examined, matches}: done is 1 when the walk reached
           the end; matches are ids, or with detail {id, source_queue, name, error_type, reason,
           status, dead_lettered_at, score} each, in walk order.
  Events:  none
]]
-- @include store

local dl, job_prefix = KEYS[1], KEYS[2]
local desc = ARGV[1] ~= 'asc'
local cur_score, cur_id = tonumber(ARGV[2]), ARGV[3]
local limit, max_entries, max_bytes = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local since, till = ARGV[7] ~= '' and ARGV[7] or '-inf', ARGV[8] ~= '' and ARGV[8] or '+inf'
local statuses = {}
for status in string.gmatch(ARGV[13], '[^,]+') do statuses[#statuses + 1] = status end
local exact = {ARGV[9], ARGV[10], ARGV[11], ARGV[12], #statuses == 1 and statuses[1] or ''}
local name_prefix, reason_part, text = ARGV[14], ARGV[15], ARGV[16]

-- The drivers: the index keys whose union, in order, holds every possible match (by default
-- the status indexes, which partition the store: all of them, or those of the statuses
-- asked for). The smallest exact index drives; the other exact filters are checked by
-- membership in their index, the smallest first, and several statuses by membership in any.
local drivers, smallest, driven_by = store_statuses(dl), nil, 0
local any_of = nil
if #statuses > 1 then
  any_of, smallest = {}, 0
  for _, status in ipairs(statuses) do  -- an empty status has nothing to walk or check
    local key = dl .. 'i:s:' .. status
    local size = redis.call('ZCARD', key)
    if size > 0 then
      any_of[#any_of + 1] = key
      smallest = smallest + size
    end
  end
  drivers = any_of
end
local others = {}
for i = 1, 5 do
  if exact[i] ~= '' then
    local key = dl .. 'i:' .. STORE_CODES[i] .. ':' .. exact[i]
    local size = redis.call('ZCARD', key)
    others[#others + 1] = {size, key, i}
    if not smallest or size < smallest then drivers, smallest, driven_by = {key}, size, i end
  end
end
-- A name prefix drives the walk through the index of each matching name when that is the
-- smallest choice; otherwise it is checked on each entry.
local prefix_checked = name_prefix == ''
if name_prefix ~= '' and exact[2] == '' then
  local names = redis.call('ZRANGE', dl .. 'v:n', '[' .. name_prefix, '(' .. name_prefix .. '\255',
    'BYLEX', 'LIMIT', 0, 65)
  if #names <= 64 then
    local keys, total = {}, 0
    for _, n in ipairs(names) do
      keys[#keys + 1] = dl .. 'i:n:' .. n
      total = total + redis.call('ZCARD', keys[#keys])
    end
    if not smallest or total < smallest then
      drivers, smallest, prefix_checked, driven_by = keys, total, true, 0
    end
  end
end
table.sort(others, function(a, b) return a[1] < b[1] end)
local checks = {}
for _, other in ipairs(others) do
  if other[3] ~= driven_by then checks[#checks + 1] = other[2] end
end
-- Several statuses need checking unless their own indexes drive the walk.
local status_checked = not any_of or drivers == any_of

-- Ids of equal score are compared byte by byte, as a sorted set orders them (Lua's own string
-- comparison follows the server's locale).
local function bytes_lt(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end

-- range(key, from, to, offset, n, scored): ZRANGE BYSCORE of `key` in walk order from `from`
-- to `to`, up to n entries after skipping `offset`, with their scores when `scored`.
local function range(key, from, to, offset, n, scored)
  local r = {'ZRANGE', key, from, to, 'BYSCORE'}
  if desc then r[#r + 1] = 'REV' end
  r[#r + 1], r[#r + 2], r[#r + 3] = 'LIMIT', offset, n
  if scored then r[#r + 1] = 'WITHSCORES' end
  return redis.call(unpack(r))
end

-- fetch_scored(key, n): up to n entries of `key` after the cursor, within [since, until], in
-- order, as {score, id} pairs; and whether more may follow.
local function fetch_scored(key, n)
  local hi, lo = till, since
  if cur_score then
    if desc then hi = cur_score else lo = cur_score end
  end
  local out, offset = {}, 0
  while true do
    local r = desc and range(key, hi, lo, offset, n, true) or range(key, lo, hi, offset, n, true)
    for i = 1, #r, 2 do
      local id, score = r[i], tonumber(r[i + 1])
      local seen = cur_score and score == cur_score and
        ((desc and not bytes_lt(id, cur_id)) or (not desc and not bytes_lt(cur_id, id)))
      if not seen then out[#out + 1] = {score, id} end
    end
    if #out > 0 or #r < 2 * n then return out, #r == 2 * n end
    offset = offset + n  -- a whole chunk of entries tied with the cursor: look further
  end
end

-- fetch_ids(key, n): as fetch_scored, the ids only (a plain list), which is half the reply:
-- the entries tied with the cursor's score come first, those past the cursor's id, then the
-- entries of higher (or lower) scores. Nil when more than n entries tie with the cursor
-- (fetch_scored pages through those).
local function fetch_ids(key, n)
  local from, to = till, since
  if not desc then from, to = since, till end
  local ids = {}
  if cur_score then
    local at = string.format('%d', cur_score)
    if cur_score >= (tonumber(since) or -math.huge) and cur_score <= (tonumber(till) or math.huge)
    then
      local tied = range(key, at, at, 0, n, false)
      if #tied >= n then return nil end
      for _, id in ipairs(tied) do
        if (desc and bytes_lt(id, cur_id)) or (not desc and bytes_lt(cur_id, id)) then
          ids[#ids + 1] = id
        end
      end
    end
    from = '(' .. at
  end
  if #ids < n then
    for _, id in ipairs(range(key, from, to, 0, n - #ids, false)) do ids[#ids + 1] = id end
  end
  return ids, #ids == n
end

local function before(a, b)
  if a[1] ~= b[1] then
    if desc then return a[1] > b[1] end
    return a[1] < b[1]
  end
  if desc then return bytes_lt(b[2], a[2]) end
  return bytes_lt(a[2], b[2])
end

-- next_chunk(n, scored): the next entries of the union of the drivers that are safe to
-- examine: their ids, their scores (numbers; nil when not `scored` and one driver walks, as a
-- plain list costs less), and whether the walk has reached the end.
local function next_chunk(n, scored)
  if #drivers == 1 then  -- already in order: nothing to merge
    if not scored then
      local ids, more = fetch_ids(drivers[1], n)
      if ids then return ids, nil, not more end
    end
    local entries, more = fetch_scored(drivers[1], n)
    local ids, scores = {}, {}
    for i, e in ipairs(entries) do scores[i], ids[i] = e[1], e[2] end
    return ids, scores, not more
  end
  -- Each driver's entries are in order already: merge them, as far as the order is known.
  local lists, heads, frontier = {}, {}, nil
  for _, key in ipairs(drivers) do
    local entries, more = fetch_scored(key, n)
    if #entries > 0 then
      lists[#lists + 1] = entries
      heads[#heads + 1] = 1
    end
    -- A driver with more entries bounds how far the merged order is known.
    if more and #entries > 0 and (not frontier or before(entries[#entries], frontier)) then
      frontier = entries[#entries]
    end
  end
  local ids, scores = {}, {}
  while true do
    local best, first = nil, nil
    for i = 1, #lists do
      local e = lists[i][heads[i]]
      if e and (not first or before(e, first)) then best, first = i, e end
    end
    if not best or (frontier and before(frontier, first)) then break end
    scores[#scores + 1], ids[#ids + 1] = first[1], first[2]
    heads[best] = heads[best] + 1
  end
  return ids, scores, frontier == nil
end

local detail = ARGV[17] == '1'
local sources = ARGV[17] == 's'
local fields = {'dlq:sourceQueue', 'name', 'dlq:errorType', 'dlq:reason', 'dlq:status',
  'dlq:deadLetteredAt', 'dlq:failedReason'}
-- Several statuses are checked by membership in any of theirs, or by absence from every
-- other status that holds dead letters (the statuses partition the store), whichever takes
-- fewer indexes: often none, when only the statuses asked for hold any.
local excluded = {}
if any_of then
  local wanted = {}
  for _, key in ipairs(any_of) do wanted[key] = true end
  for _, key in ipairs(store_statuses(dl)) do
    if not wanted[key] then excluded[#excluded + 1] = key end
  end
  -- Only statuses asked for hold dead letters: every entry is in one of them.
  if #excluded == 0 then status_checked = true end
end

-- members(chunk): for each id of a chunk of the drivers, whether it is in every index of the
-- other exact filters (and in one of the statuses asked for): one ZMSCORE per index for the
-- entries still alive, the most selective index first.
local function members(chunk)
  local alive = {}
  for n = 1, #chunk do alive[n] = true end
  if (#checks == 0 and status_checked) or #chunk == 0 then return alive end
  -- narrow(index, wanted): keep the live entries whose presence in `index` is `wanted`.
  local function narrow(index, wanted)
    local at, ids = {}, {}
    for n = 1, #chunk do
      if alive[n] then
        at[#at + 1] = n
        ids[#ids + 1] = chunk[n]
      end
    end
    if #ids == 0 then return end
    local scores = redis.call('ZMSCORE', index, unpack(ids))
    for j, n in ipairs(at) do
      if (scores[j] ~= false and scores[j] ~= nil) ~= wanted then alive[n] = false end
    end
  end
  for _, index in ipairs(checks) do narrow(index, true) end
  if status_checked then return alive end
  if #excluded < #any_of then
    for _, index in ipairs(excluded) do narrow(index, false) end
    return alive
  end
  local in_any = {}
  for _, index in ipairs(any_of) do
    local scores = redis.call('ZMSCORE', index, unpack(chunk))
    for n = 1, #chunk do
      if scores[n] then in_any[n] = true end
    end
  end
  for n = 1, #chunk do alive[n] = alive[n] and in_any[n] == true end
  return alive
end

-- matches(id): whether dead letter `id` (in the drivers and the other exact indexes) matches,
-- its fields when detail is asked (else true), and the bytes of text examined.
local function matches(id)
  local key, f = job_prefix .. id, true
  if detail or sources or not prefix_checked then
    f = redis.call('HMGET', key, unpack(fields, 1, detail and 6 or 2))
    f[5] = f[5] or 'pending'
    if not prefix_checked and string.sub(f[2] or '', 1, #name_prefix) ~= name_prefix then
      return nil, 0
    end
  end
  local bytes = 0
  if reason_part ~= '' then
    local failed = redis.call('HGET', key, 'dlq:failedReason') or ''
    bytes = #failed
    if not string.find(string.lower(failed), reason_part, 1, true) then return nil, bytes end
  end
  if text ~= '' then
    local data = redis.call('HGET', key, 'data') or ''
    bytes = bytes + #data
    if not string.find(data, text, 1, true) then return nil, bytes end
  end
  return f, bytes
end

local found, examined, bytes = {}, 0, 0
local done = 0
local moved = false
if smallest == 0 then
  done = 1
else
  while true do
    -- Sparse matches (other filters to check) are looked for in larger chunks.
    local want = (#checks > 0 or not status_checked) and 500 or math.max(limit - #found, 16)
    local ids, scores, at_end = next_chunk(math.min(want, max_entries - examined, 500), detail)
    local alive = members(ids)
    local stopped, last = false, nil
    for n, id in ipairs(ids) do
      local f, cost = nil, 0
      if alive[n] then f, cost = matches(id) end
      examined, bytes, last = examined + 1, bytes + cost, n
      if f then
        if detail then
          found[#found + 1] = {id, f[1], f[2] or '', f[3] or '', f[4] or '', f[5], f[6] or '0',
            string.format('%d', scores[n])}
        elseif sources then
          found[#found + 1] = {id, f[1]}
        else
          found[#found + 1] = id
        end
      end
      if #found >= limit or examined >= max_entries or bytes >= max_bytes then
        stopped = true
        break
      end
    end
    if last then
      -- The cursor: the last entry examined, with its score (read back when the chunk came
      -- without: it is in the one driver, as the script has changed nothing).
      cur_id = ids[last]
      cur_score = scores and scores[last] or tonumber(redis.call('ZSCORE', drivers[1], cur_id))
      moved = true
    end
    if stopped then
      if at_end and last == #ids then done = 1 end
      break
    end
    if at_end then
      done = 1
      break
    end
  end
end
local score_out = moved and string.format('%d', cur_score) or ARGV[2]
local id_out = moved and cur_id or ARGV[3]
return {done, score_out, id_out, examined, found}
