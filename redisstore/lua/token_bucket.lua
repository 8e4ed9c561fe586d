-- token_bucket: GCRA. The key holds the theoretical arrival time (TAT) in µs;
-- every unit of cost moves it one emission interval (ei) later, and a request
-- passes while TAT - now stays within burst * ei.
local token_bucket = {}

function token_bucket.check(key, now, a)
  local ei, n = a.ei, a.cost
  local tau = a.burst * ei
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  local nxt = tat + n * ei
  local r = { tat = nxt }
  if nxt - now > tau then
    r.rem = math.floor((tau - (tat - now)) / ei)
    r.retry = nxt - now - tau
    if n > a.burst then r.retry = NEVER end
    r.reset = tat - now
    return r
  end
  r.ok = true
  r.rem = math.floor((tau - (nxt - now)) / ei)
  r.retry = 0
  r.reset = nxt - now
  return r
end

function token_bucket.commit(key, now, a, r)
  redis.call('SET', key, string.format('%d', r.tat), 'PX', ms(r.reset))
end

function token_bucket.refund(key, now, a)
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat > now then
    local back = math.max(now, tat - a.cost * a.ei)
    local ttl = ms(back - now)
    if back > now then
      redis.call('SET', key, string.format('%d', back), 'PX', ttl)
    else
      redis.call('DEL', key)
    end
  end
end

function token_bucket.reset(key, now, a)
  redis.call('DEL', key)
end
