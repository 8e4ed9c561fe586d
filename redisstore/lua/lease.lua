-- Leases of a concurrency limit (redlimit.Semaphore, redisstore/lease.go):
-- a ZSET per key, each member a lease id scored by its expiry, µs of the
-- script's clock (Redis TIME). A lease past its expiry holds no slot: each
-- entry trims them first, and the key expires with its last lease.

-- entry decides an entry of kind ACQUIRE, RENEW or RELEASE (batch.lua) on
-- keys[k0 + 1], whose values start at ARGV[v]: slots, TTL µs, lease id.
-- It appends held (1/0), the leases the key holds after it, and the µs
-- until its first lease expires when the entry did not hold (else 0).
local function entry(kd, x, keys, k0, v, out)
  local key, slots, ttl, id = keys[k0 + 1], ARGV[v] + 0, ARGV[v + 1] + 0, ARGV[v + 2]
  -- A key of another type fails here, before anything is written.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', str(now))
  local held = redis.call('ZSCORE', key, id) ~= false
  local n = redis.call('ZCARD', key)
  local ok, wait = 0, 0
  if kd == RELEASE then
    if held then
      redis.call('ZREM', key, id)
      n = n - 1
    end
  elseif held or (kd == ACQUIRE and n < slots) then
    if not held then n = n + 1 end
    redis.call('ZADD', key, str(now + ttl), id)
    ok = 1
  elseif n > 0 then
    wait = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2] - now
  end
  if ok == 1 then
    -- The key lives as long as its last lease.
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2] - now
    redis.call('PEXPIRE', key, ms(last))
  end
  out[#out + 1], out[#out + 2], out[#out + 3] = ok, n, wait
end
