-- emit(stream, maxlen, event, field, value, ...): append one event to a queue's events stream,
-- trimmed to about maxlen entries. Every transition records its event through this function.
-- Returns the entry's ID, unique in the stream.
local function emit(stream, maxlen, event, ...)
  return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'event', event, ...)
end
