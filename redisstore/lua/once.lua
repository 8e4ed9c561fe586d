-- A debit counted at most once per idempotency id
-- (redisstore.Store.DebitOnce), and the entry function of the kinds of
-- several limits; joined after several.lua.

-- once_limit decides the debit of one limit whose key is keys[k0 + 1].
-- Its seven values follow args[a0] (several.lua; the seventh is 1). The
-- eighth is how long the marker lives, µs (see redisstore/once.go).
-- keys[k0 + 2] is the marker: the limit's key, ':once:' and the id. So it
-- has the same hash tag: on Redis Cluster, the same slot. It appends to
-- out 1 if it counted the debit, or 0 if a call with the same id had.
-- Then it appends allowed (1/0), remaining, retry-after µs (-1 for never)
-- and reset-after µs. That is the debit's result when it counted it.
-- Otherwise it is a peek at the same cost: the state after the debit, and
-- whatever came since.
local function once_limit(keys, k0, args, a0, out)
  local marker = keys[k0 + 2]
  local counted = redis.call('EXISTS', marker) == 0
  out[#out + 1] = counted and 1 or 0
  decide_limits(counted, keys, k0, 1, args, a0, out)
  if counted then redis.call('SET', marker, args[a0 + 6], 'PX', ms(tonumber(args[a0 + 8]))) end
end

-- entry decides an entry of kind SEVERAL, ADMIT or ONCE (batch.lua) of x
-- limits, whose keys follow keys[k0] and whose values start at ARGV[v],
-- and appends its values to out.
local function entry(kd, x, keys, k0, v, out)
  if kd == ONCE then return once_limit(keys, k0, ARGV, v - 1, out) end
  decide_limits(true, keys, k0, x, ARGV, v - 1, out, kd == ADMIT)
end
