-- sliding_window for one limit: the hash in one HGETALL, then
-- sliding_window_check. When allowed, it makes one HINCRBY. The call that
-- makes a new latest window also retires the windows before the one
-- before it (windows.lua). It sets the TTL, as several.lua's windows_add
-- does.
local function sliding_window_one(key, allow, W, L, n, cost)
  local lw, lc, pc, h = windows_read(key)
  local ok, rem, retry, reset, w = sliding_window_check(now, W, L, n, lw, lc, pc)
  if ok and allow then
    if lw ~= w then windows_retire(key, h, w - SLIDING_WINDOW_SPAN + 1) end
    redis.call('HINCRBY', key, str(w), cost)
    if lw ~= w then redis.call('PEXPIRE', key, ms(reset)) end
  end
  return ok, rem, retry, reset
end
