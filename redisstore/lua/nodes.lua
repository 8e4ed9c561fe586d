-- The live-node registry: a sorted set of node ids. Each is scored by the
-- server time (µs) until which its last heartbeat counts. So nodes with
-- different TTLs count each other. Not part of the decision script.
-- KEYS[1]: the registry. ARGV[1]: node id. ARGV[2]: how long this node's
-- heartbeat counts, µs. ARGV[3]: 'beat' or 'leave'.
-- Reply: { live nodes, 1 if this beat added the node (it was missing) }.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl = tonumber(ARGV[2])
local added = 0
if ARGV[3] == 'leave' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  added = redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  -- The set lives as long as its longest-lived member.
  local ms = math.ceil(ttl / 1000)
  if redis.call('PTTL', KEYS[1]) < ms then
    redis.call('PEXPIRE', KEYS[1], ms)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return { redis.call('ZCARD', KEYS[1]), added }
