-- entry decides an entry of kind RESET, REFUND or GIVEBACK (batch.lua) of
-- x limits, whose keys follow keys[k0] and whose values start at ARGV[v].
local function entry(kd, x, keys, k0, v, out)
  change_limits(kd == RESET, kd == GIVEBACK, keys, k0, x, ARGV, v)
end
