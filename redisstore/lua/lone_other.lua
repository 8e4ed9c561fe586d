-- The decision of a lone entry of another kind (lone.lua) with entry, the
-- entry function of its files (once.lua, refund.lua), and
-- batch.lua's reply for it.
local kd, x = string.byte(ARGV[1], 1, 2)
local n, e = sized(kd, x, 6)
if n == nil then return e end
local out = { now }
local fine, err = pcall(entry, kd, x, KEYS, 0, 6, out)
if not fine then return { now, 1, key_failure(err), 1 } end
out[#out + 1] = 0
return out
