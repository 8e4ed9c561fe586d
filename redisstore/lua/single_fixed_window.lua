-- fixed_window for one limit (fixed_window.lua). Allowing is one INCRBY,
-- given back with DECRBY when the new count is above the limit: a denial
-- pays one call more, the common allowed request one call less than a GET
-- first would. Only a cost above the limit, which no count can admit, and
-- Peek read with GET.
local W, L = tonumber(ARGV[4]), tonumber(ARGV[5])
local w = math.floor(now / W)
local left = (w + 1) * W - now -- until the window ends
local wkey = key .. ':' .. string.format('%d', w)
local c -- the window's count before this request
if allow and n <= L then
  c = redis.call('INCRBY', wkey, n)
  if c <= L then
    -- The call that creates the counter gives it its TTL, which ends with
    -- the window: the same instant for every later call in the window.
    if c == n then redis.call('PEXPIRE', wkey, ttl(left)) end
    return { now, 1, L - c, 0, left }
  end
  -- c > L >= n: the counter was there before, with its TTL.
  redis.call('DECRBY', wkey, n)
  c = c - n
else
  c = tonumber(redis.call('GET', wkey) or '0')
  if c + n <= L then return { now, 1, L - c - n, 0, left } end
end
local retry, reset = left, 0
if n > L then retry = NEVER end
if c > 0 then reset = left end
return { now, 0, L - c, retry, reset }
