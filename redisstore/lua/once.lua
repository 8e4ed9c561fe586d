-- The path of a debit counted at most once per idempotency id
-- (redisstore.Store.DebitOnce), joined after the prelude, every
-- algorithm's files, debit.lua and several.lua (decide_limits).
-- KEYS[1]: the limit's key.
-- KEYS[2]: the charge's marker: the limit's key, ':once:' and the id, so
-- that it has the same hash tag (on Redis Cluster, the same slot).
-- ARGV[1]: 'once'.
-- ARGV[4..10]: decide.lua's seven values of the debit (the seventh is 1).
-- ARGV[11]: how long the marker lives, µs (see redisstore/once.go).
-- Reply: { now, 1 if this call counted the debit or 0 if a call with the
-- same id had, then allowed (1/0), remaining, retry-after µs (-1 for
-- never), reset-after µs }. The four values are the debit's result when
-- this call counted it, and a peek at the same cost otherwise (the state
-- after the debit, and whatever came since).
local a = tonumber(ARGV[4])
if a ~= FIXED_WINDOW and a ~= SLIDING_LOG and a ~= SLIDING_WINDOW and a ~= TOKEN_BUCKET then
  return redis.error_reply('ERR redlimit: unknown algorithm ' .. tostring(ARGV[4]))
end
local out = { now, 0 }
if redis.call('EXISTS', KEYS[2]) == 1 then
  decide_limits(false, KEYS, 0, 1, ARGV, 3, out)
  return out
end
decide_limits(true, KEYS, 0, 1, ARGV, 3, out)
redis.call('SET', KEYS[2], ARGV[9], 'PX', ms(tonumber(ARGV[11])))
out[2] = 1
return out
