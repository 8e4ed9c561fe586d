-- Queued requests (redlimit.Queuer): a QUEUE entry queues a token
-- bucket's request at the first instant it conforms, within a maximum
-- wait; an UNQUEUE entry gives that place back. As memory/queue.go.
-- An entry has one limit: its seven values (wire.go), the last being the
-- maximum wait µs (QUEUE) or the TAT the turn wrote (UNQUEUE).

-- token_bucket_queue is token_bucket_check for a request that may wait
-- up to wait µs: one that does not conform now takes the first instant
-- it does, its TAT beyond the tolerance, but not past 2^53 µs (a number
-- would round it). It returns allowed, remaining, retry-after,
-- reset-after, the TAT to write, then the wait.
local function token_bucket_queue(now, ei, burst, n, tat, wait)
  local ok, rem, retry, reset, nxt = token_bucket_check(now, ei, burst, n, tat)
  if ok or retry == NEVER or retry > wait or retry + burst * ei > 9007199254740992 - now then
    return ok, rem, retry, reset, nxt, 0
  end
  local due = retry + burst * ei
  return true, 0, 0, due, now + due, retry
end

-- entry decides a QUEUE or UNQUEUE entry (batch.lua) on keys[k0 + 1],
-- whose values start at ARGV[v]. A QUEUE answers 1, remaining, wait,
-- reset-after, TAT when queued; 0, remaining, retry-after, reset-after,
-- 0 when refused. An UNQUEUE answers 1 when it gave back, else 0.
local function entry(kd, x, keys, k0, v, out)
  local key = keys[k0 + 1]
  local burst, ei, n, last = tonumber(ARGV[v + 3]), tonumber(ARGV[v + 4]), tonumber(ARGV[v + 5]), tonumber(ARGV[v + 6])
  local tat, given, lst, epoch = token_bucket_read(redis.call('GET', key))
  if kd == QUEUE then
    local ok, rem, retry, reset, nxt, wait = token_bucket_queue(now, ei, burst, n, tat, last)
    local o = #out
    if ok then
      redis.call('SET', key, token_bucket_value(nxt, given, lst, epoch, now), 'PX', ms(reset))
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, rem, wait, reset, nxt
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, rem, retry, reset, 0
    end
    return
  end
  if tat <= now or tat ~= last then
    out[#out + 1] = 0
    return
  end
  -- Kept even when full again: a clock that goes back finds it, as
  -- memory's entry.
  tat = tat - n * ei
  redis.call('SET', key, token_bucket_value(tat, given, lst, epoch, 0), 'PX', ms(math.max(tat - now, 0)))
  out[#out + 1] = 1
end
