-- fixed_window for one limit, with fixed_window_check. Allowing is one
-- HINCRBY, given back when the new count is above the limit. A denial
-- pays one call more. The common allowed request pays one call less than
-- a read first would. A field the HINCRBY made is a new window. The hash
-- is then read, to retire the previous latest window. If the clock went
-- back, the request is counted in the later window instead. Only live
-- windows have fields named by their index: one that exists is the
-- latest. Peek and a cost above the limit only read.
local function fixed_window_one(key, allow, W, L, n, cost)
  local ok, rem, retry, reset
  if allow and n <= L then
    local w = fixed_window_of(now, W)
    local field = str(w)
    local c = redis.call('HINCRBY', key, field, cost)
    if c ~= n then
      -- The field was there, so w is the key's latest window, and held c - n.
      ok, rem, retry, reset = fixed_window_check(now, W, L, n, w, c - n)
      if not ok then redis.call('HINCRBY', key, field, -n) end
      return ok, rem, retry, reset
    end
    local lw, lc, _, h = windows_read(key)
    if lw == w then
      -- A new latest window, which the request fits: retire the previous one
      -- (windows.lua). h holds w, made by the HINCRBY, which windows_retire
      -- keeps.
      ok, rem, retry, reset = fixed_window_check(now, W, L, n, nil, 0)
      windows_retire(key, h, w)
      redis.call('PEXPIRE', key, ms(reset))
      return true, rem, retry, reset
    end
    -- The clock went back before the key's window: count it there.
    redis.call('HDEL', key, field)
    ok, rem, retry, reset, w = fixed_window_check(now, W, L, n, lw, lc)
    if ok then redis.call('HINCRBY', key, str(w), cost) end
    return ok, rem, retry, reset
  end
  local lw, lc = windows_read(key)
  ok, rem, retry, reset = fixed_window_check(now, W, L, n, lw, lc)
  return ok, rem, retry, reset
end
