-- token_bucket for one limit (token_bucket.lua): GET and, when allowed, SET.
local ei, burst = tonumber(ARGV[4]), tonumber(ARGV[5])
local tau = burst * ei
local tat = tonumber(redis.call('GET', key) or '0')
if tat < now then tat = now end
local nxt = tat + n * ei
if nxt - now <= tau then
  if allow then
    redis.call('SET', key, string.format('%d', nxt), 'PX', ttl(nxt - now))
  end
  return { now, 1, math.floor((tau - (nxt - now)) / ei), 0, nxt - now }
end
local retry = nxt - now - tau
if n > burst then retry = NEVER end
return { now, 0, math.floor((tau - (tat - now)) / ei), retry, tat - now }
