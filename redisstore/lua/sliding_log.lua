-- sliding_log: one sorted set per key, score = request time in µs. An entry
-- counts while now - score < window. Members are "<time>-<seq>" and added
-- with ZADD NX, so requests in the same microsecond are all counted.
local sliding_log = {}

function sliding_log.check(key, now, a)
  local W, L, n = a.window, a.count, a.cost
  local since = string.format('%d', now - W)
  local c = redis.call('ZCOUNT', key, '(' .. since, '+inf')
  local r = { count = c, since = since }
  local newest = now
  if c > 0 then
    local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    local t = tonumber(top[2])
    if t > newest or c + n > L then newest = t end
  end
  if c + n > L then
    r.rem = L - c
    if n > L then
      r.retry = NEVER
    else
      -- The (c+n-L)-th oldest live entry must expire first.
      local k = c + n - L
      local e = redis.call('ZRANGEBYSCORE', key, '(' .. since, '+inf',
        'WITHSCORES', 'LIMIT', k - 1, 1)
      r.retry = tonumber(e[2]) + W - now
    end
    r.reset = 0
    if c > 0 then r.reset = newest + W - now end
    return r
  end
  r.ok = true
  r.rem = L - c - n
  r.retry = 0
  r.reset = newest + W - now
  return r
end

function sliding_log.commit(key, now, a, r)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', r.since)
  local stamp = string.format('%d', now)
  -- The trim leaves the r.count live entries check counted (unless the same
  -- limit came twice in one call), which number the new members.
  local seq = r.count
  local added = 0
  -- Members that exist already (only possible if the clock went back, or
  -- the same limit came twice) are skipped by NX, and the loop adds more
  -- until the cost is counted.
  while added < a.cost do
    local batch = { 'ZADD', key, 'NX' }
    for _ = 1, math.min(a.cost - added, 1000) do
      seq = seq + 1
      batch[#batch + 1] = stamp
      batch[#batch + 1] = stamp .. '-' .. seq
    end
    added = added + redis.call(unpack(batch))
  end
  redis.call('PEXPIRE', key, ms(r.reset))
end

function sliding_log.refund(key, now, a)
  local stamp = string.format('%d', now)
  local gone = redis.call('ZRANGEBYSCORE', key, stamp, stamp, 'LIMIT', 0, a.cost)
  if #gone > 0 then redis.call('ZREM', key, unpack(gone)) end
end

function sliding_log.reset(key, now, a)
  redis.call('DEL', key)
end
