-- sliding_window for one limit (sliding_window.lua): both counters in one
-- MGET, and the TTL set only by the call that creates the current window's
-- counter (it ends with the next window, the same instant for every call).
local W, L = tonumber(ARGV[4]), tonumber(ARGV[5])
local w = math.floor(now / W)
local elapsed = now - w * W
local wkey = key .. ':' .. string.format('%d', w)
local got = redis.call('MGET', wkey, key .. ':' .. string.format('%d', w - 1))
local cur = tonumber(got[1] or '0')
local prev = tonumber(got[2] or '0')
local est = prev * (W - elapsed) / W + cur
local room = L - est
if room >= n then
  if allow then
    redis.call('INCRBY', wkey, n)
    if cur == 0 then redis.call('PEXPIRE', wkey, ttl(2 * W - elapsed)) end
  end
  return { now, 1, math.max(0, math.floor(room - n)), 0, 2 * W - elapsed }
end
local retry
local reset = 0
if n > L then
  retry = NEVER
elseif cur + n <= L then
  -- The previous window's weight must fall until the cost fits.
  local at = W - (L - cur - n) * W / prev
  retry = math.ceil(at - elapsed)
else
  -- Only in the next window, as this one's count fades.
  local at = W - (L - n) * W / cur
  retry = W - elapsed + math.ceil(at)
end
if cur > 0 then
  reset = 2 * W - elapsed
elseif prev > 0 then
  reset = W - elapsed
end
return { now, 0, math.max(0, math.floor(room)), retry, reset }
