-- The outbox of one dead letter queue: every change of one of its dead letters, appended by
-- the very script that makes the change (same slot, same script: no crash can skip it), for
-- the record exporter and the webhook deliverers to drain (docs/record.md):
--   dl .. 'x'      STREAM one entry per change: event, id, at, status; on arrival the indexed
--                         values ('v:q' source queue, 'v:n' name, 'v:e' error type, 'v:r'
--                         reason), so a reader has a summary even once the dead letter is
--                         gone; on removal the dead letter's fields as they were
--                         ('h:<field>', bytes untouched)
--   dl .. 'x:on'   STRING present while something drains the outbox (`lazarus record`,
--                         webhooks): without it nothing is appended, so an outbox nobody
--                         reads never grows; with it, entries stay until every consumer group
--                         has acknowledged them (the drainers trim, never the scripts)
-- Every change of a dead letter must call outbox_append: store_add (dead-lettered),
-- store_remove (the cause: purged, pruned, removed, cleaned, claimed) and every status
-- change, as outbox_append(dl, <status entered>, id, now, <status entered>) after the hash
-- holds the new status (and its timeline): the event of a status change is the status.
--
-- outbox_append(dl, event, id, at, status, snapshot_key, values): append one entry when the
-- outbox is enabled. `at` (ms) may be '' (the entry id's time stands for it);
-- `snapshot_key`, when given, is the dead letter's hash, copied into the entry because it is
-- about to go; `values`, when given, the store's values {q, n, e, r, s}.
-- Whether the outbox of each store is on, read once per script call (no script turns it on
-- or off while it also changes dead letters).
local outbox_enabled = {}
local function outbox_append(dl, event, id, at, status, snapshot_key, values)
  local on = outbox_enabled[dl]
  if on == nil then
    on = redis.call('EXISTS', dl .. 'x:on') == 1
    outbox_enabled[dl] = on
  end
  if not on then return end
  local entry = {'event', event, 'id', id, 'at', at or '', 'status', status or ''}
  if values then
    for i, code in ipairs({'q', 'n', 'e', 'r'}) do
      entry[#entry + 1] = 'v:' .. code
      entry[#entry + 1] = values[i]
    end
  end
  if snapshot_key then
    local fields = redis.call('HGETALL', snapshot_key)
    for i = 1, #fields, 2 do
      entry[#entry + 1] = 'h:' .. fields[i]
      entry[#entry + 1] = fields[i + 1]
    end
  end
  redis.call('XADD', dl .. 'x', '*', unpack(entry))
end
