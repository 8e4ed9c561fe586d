-- sliding_log for one limit: log.lua's read, sliding_log_check, and
-- log.lua's append when allowed. A log of at most three entries is read
-- whole by the first ZRANGE.
local function sliding_log_one(key, allow, W, L, n, cost)
  local t, c, newest, top, total, base, old = log_read(key, now, W)
  local ok, rem, retry, reset = sliding_log_check(key, now, W, L, n, t, c, newest, base, c)
  if ok and allow then log_append(key, W, total, newest, top, t, n, old and log_crosses(total, n, L), 0) end
  return ok, rem, retry, reset
end
