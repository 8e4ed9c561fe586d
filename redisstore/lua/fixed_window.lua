-- fixed_window: a counter per window aligned to the epoch, INCRBY, and
-- PEXPIRE when the INCRBY created it.
-- The window's key is the limit's key with ":<window index>" appended, so it
-- shares the hash tag (and Cluster slot) of the declared key.
local fixed_window = {}

function fixed_window.check(key, now, a)
  local W, L, n = a.window, a.count, a.cost
  local w = math.floor(now / W)
  local finish = (w + 1) * W
  local wkey = key .. ':' .. string.format('%d', w)
  local c = tonumber(redis.call('GET', wkey) or '0')
  local r = { wkey = wkey, ttl = finish - now }
  if c + n > L then
    r.rem = L - c
    r.retry = finish - now
    if n > L then r.retry = NEVER end
    r.reset = 0
    if c > 0 then r.reset = finish - now end
    return r
  end
  r.ok = true
  r.rem = L - c - n
  r.retry = 0
  r.reset = finish - now
  return r
end

-- The call that creates a counter gives it its TTL, which ends with the
-- window (the next one for the sliding window): the same instant for every
-- later call, so they need not set it again.
function fixed_window.commit(key, now, a, r)
  if redis.call('INCRBY', r.wkey, a.cost) == a.cost then
    redis.call('PEXPIRE', r.wkey, ms(r.ttl))
  end
end

function fixed_window.refund(key, now, a)
  local wkey = key .. ':' .. string.format('%d', math.floor(now / a.window))
  if tonumber(redis.call('GET', wkey) or '0') >= a.cost then
    redis.call('DECRBY', wkey, a.cost)
  end
end

function fixed_window.reset(key, now, a)
  redis.call('DEL', key .. ':' .. string.format('%d', math.floor(now / a.window)))
end
