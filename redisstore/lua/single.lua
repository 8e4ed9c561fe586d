-- The path of one limit, which AllowN and Peek run, joined after the
-- prelude, the files of the limit's algorithm and its
-- single_<algorithm>.lua, which defines <algorithm>_one(key, allow, W, L,
-- n, cost): straight-line code that decides a request of cost n (cost: the
-- same as text) on key under a limit of L per W µs (token bucket: burst L,
-- one token every W µs) at now, with no tables of its own and as few Redis
-- calls as it can; it writes only when allow, and returns allowed,
-- remaining, retry-after and reset-after. script.go names it one, in
-- front of this file. batch.lua calls the same functions.
-- KEYS[1]: the limit's key.
-- ARGV[1]: 'allow' or 'peek'.
-- ARGV[4]: window µs (token bucket: emission interval µs).
-- ARGV[5]: count (token bucket: burst).
-- ARGV[6]: cost.
-- Reply: { now, allowed (1/0), remaining, retry-after µs (-1 for never),
-- reset-after µs }: decide.lua's reply for one limit. A key of another
-- type, or state the script cannot parse, replies the error KEYSTATE.
-- A key the decision cannot use replies KEYSTATE (see key_error).
local fine, ok, rem, retry, reset = pcall(one, KEYS[1], ARGV[1] == 'allow', ARGV[4] + 0, ARGV[5] + 0, ARGV[6] + 0, ARGV[6])
if not fine then return key_error(ok) end
return { now, ok and 1 or 0, rem, retry, reset }
