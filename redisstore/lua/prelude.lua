-- redlimit: one script decides every limit of a request (see decide.lua).
-- The files are joined in the order prelude, fixed_window, sliding_log,
-- sliding_window, token_bucket, decide. Times are integer microseconds.
local NEVER = -1

-- ms converts a positive duration in µs to a TTL in whole milliseconds, rounded up.
local function ms(us)
  return math.max(1, math.ceil(us / 1000))
end
