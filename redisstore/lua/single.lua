-- redlimit: the script of one limit, which AllowN and Peek run (AllowAll with
-- several limits, Reset and the refund run decide.lua). This file is joined
-- in front of one of single_fixed_window.lua, single_sliding_log.lua,
-- single_sliding_window.lua and single_token_bucket.lua. Each is
-- straight-line code for its algorithm: it follows the algorithm's file (and
-- memory/algorithms.go) operation for operation and gives the same answers,
-- but builds no tables or closures per call beyond its reply, and makes as
-- few Redis calls as it can.
-- KEYS[1]: the limit's key.
-- ARGV[1]: 'allow' or 'peek'.
-- ARGV[2]: the time in µs, or '' for the server's clock (TIME).
-- ARGV[3]: µs added to every TTL.
-- ARGV[4]: window µs (token bucket: emission interval µs).
-- ARGV[5]: count (token bucket: burst).
-- ARGV[6]: cost.
-- Reply: { now, allowed (1/0), remaining, retry-after µs (-1 for never),
-- reset-after µs }: decide.lua's reply for one limit.
if redis.replicate_commands then redis.replicate_commands() end

local NEVER = -1

local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end
local allow = ARGV[1] == 'allow'
local key = KEYS[1]
local n = tonumber(ARGV[6])

-- ttl converts a positive duration in µs to a TTL in whole milliseconds,
-- rounded up, plus the margin (prelude.lua's ms).
local function ttl(us)
  return math.max(1, math.ceil((us + tonumber(ARGV[3])) / 1000))
end
