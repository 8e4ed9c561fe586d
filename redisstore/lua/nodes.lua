-- The live-node registry: a sorted set of node ids scored by their last
-- heartbeat (server time, µs). Not part of the decision script.
-- KEYS[1]: the registry. ARGV[1]: node id. ARGV[2]: how long a heartbeat
-- counts, µs. ARGV[3]: 'beat' or 'leave'.
-- Reply: { live nodes }.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
if ARGV[3] == 'leave' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], now, ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - ttl)
redis.call('PEXPIRE', KEYS[1], math.ceil(ttl / 1000))
return { redis.call('ZCARD', KEYS[1]) }
