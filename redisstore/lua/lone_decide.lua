-- The decision of a lone entry (lone.lua) with one, its algorithm's
-- <algorithm>_one, and batch.lua's reply for it: the limit's four values
-- are ARGV[6..9], its key KEYS[1].
local fine, ok, rem, retry, reset = pcall(one, KEYS[1], string.byte(ARGV[1]) == ALLOW, window(ARGV[7]), ARGV[8] + 0, ARGV[9] + 0, ARGV[9])
if not fine then return { now, 1, key_failure(ok), 1 } end
if ok then return { now, rem, reset, 0 } end
return { now, -1 - rem, retry, reset, 0 }
