-- sliding_log for one limit (sliding_log.lua). After the trim, the set holds
-- exactly the c live entries counted before it, so c also numbers the new
-- members (no ZCARD), and a cost of 1 is added without building a batch.
local W, L = tonumber(ARGV[4]), tonumber(ARGV[5])
local since = string.format('%d', now - W)
local c = redis.call('ZCOUNT', key, '(' .. since, '+inf')
local newest = now
if c > 0 then
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local t = tonumber(top[2])
  if t > newest or c + n > L then newest = t end
end
if c + n <= L then
  if allow then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', since)
    local stamp = string.format('%d', now)
    local seq = c
    -- Members that exist already (only possible if the clock went back) are
    -- skipped by NX, and more are added until the cost is counted.
    if n == 1 then
      repeat seq = seq + 1 until redis.call('ZADD', key, 'NX', stamp, stamp .. '-' .. seq) == 1
    else
      local added = 0
      while added < n do
        local batch = { 'ZADD', key, 'NX' }
        for _ = 1, math.min(n - added, 1000) do
          seq = seq + 1
          batch[#batch + 1] = stamp
          batch[#batch + 1] = stamp .. '-' .. seq
        end
        added = added + redis.call(unpack(batch))
      end
    end
    redis.call('PEXPIRE', key, ttl(newest + W - now))
  end
  return { now, 1, L - c - n, 0, newest + W - now }
end
local retry, reset = NEVER, 0
if n <= L then
  -- The (c+n-L)-th oldest live entry must expire first.
  local e = redis.call('ZRANGEBYSCORE', key, '(' .. since, '+inf', 'WITHSCORES', 'LIMIT', c + n - L - 1, 1)
  retry = tonumber(e[2]) + W - now
end
if c > 0 then reset = newest + W - now end
return { now, 0, L - c, retry, reset }
