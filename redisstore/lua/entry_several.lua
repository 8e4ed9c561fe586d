-- entry decides an entry of kind SEVERAL, ADMIT or ONCE (batch.lua) of x
-- limits, whose keys follow keys[k0] and whose values start at ARGV[v],
-- and appends its values to out.
local function entry(kd, x, keys, k0, v, out)
  if kd == ONCE then return once_limit(keys, k0, ARGV, v - 1, out) end
  decide_limits(true, keys, k0, x, ARGV, v - 1, out, kd == ADMIT)
end
