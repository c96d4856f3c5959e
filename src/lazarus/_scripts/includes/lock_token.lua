-- Lock tokens. A claim holds its job under '<worker>:<attempt>:<event id>': the worker's token
-- base (its name, which may hold ':'), the attempt the claim starts, and the ID of the claim's
-- 'active' event, unique in the queue's stream. A job removed and added again under its id
-- starts its attempts at 1 again; the event ID keeps the token of a later life from being the
-- token of an earlier one, whose outcome's reply memo (includes/once.lua) would otherwise
-- answer for an outcome of the later life.

-- lock_token(token_base, attempt, event): the token of a claim.
local function lock_token(token_base, attempt, event)
  return token_base .. ':' .. attempt .. ':' .. event
end

-- lock_token_worker(token): the worker name in a token, '' when it is none of ours (a token
-- of '<worker>:<attempt>', as lazarus 0.1 made them, included).
local function lock_token_worker(token)
  token = token or ''
  return string.match(token, '^(.*):%d+:%d+%-%d+$') or string.match(token, '^(.*):%d+$') or ''
end
