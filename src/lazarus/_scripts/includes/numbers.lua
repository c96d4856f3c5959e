-- Numbers as text. A number handed to redis.call is printed by Redis (with '%.17g' before
-- Redis 7.2), and one joined to a string by Lua (with '%.14g'): printf's floating-point path,
-- about a microsecond for the 13- to 16-digit integers of times and scores, once per use. So
-- scripts hand Redis string literals for constants ('0', '1'), the caller's own text where it
-- is an integer's already (ARGV), and int_text for an integer they compute. int_text is a
-- string.format itself, about as dear as Redis's printing: it saves where a value is used
-- more than once in a call (a time, a score written to five indexes), and costs nothing more
-- elsewhere. tests/scripts/test_numbers.py checks the hot paths hand Redis no number.

-- int_text(n): the decimal text of the integer n (|n| < 2^53), printed once per script call;
-- a string given for n (a time as ARGV holds it, say) is its own text.
local int_texts = {}
local function int_text(n)
  if type(n) ~= 'number' then return n end
  local text = int_texts[n]
  if not text then
    text = string.format('%d', n)
    int_texts[n] = text
  end
  return text
end
