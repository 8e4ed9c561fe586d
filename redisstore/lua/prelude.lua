-- redlimit: one script decides every limit of a request (see decide.lua).
-- The files are joined in the order prelude, fixed_window, sliding_log,
-- sliding_window, token_bucket, decide. Times are integer microseconds.
local NEVER = -1

-- MARGIN (µs, ARGV[3]) lengthens every TTL; see redisstore.WithTTLMargin.
local MARGIN = tonumber(ARGV[3])

-- ms converts a positive duration in µs to a TTL in whole milliseconds,
-- rounded up, plus the margin.
local function ms(us)
  return math.max(1, math.ceil((us + MARGIN) / 1000))
end
