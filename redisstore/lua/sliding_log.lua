-- sliding_log: the log of log.lua (memory/algorithms.go, checkLog). Exact: a
-- request of cost n passes while the units admitted in the period before
-- it, plus n, stay within the count.

-- sliding_log_check decides a request of cost n at now under a limit of L
-- per W µs on key's log, as log_read read it: t, c, newest, and base, with
-- which a denial finds when the units it waits for expire (log_unit_at).
-- Of the c live units, the oldest stored are in the log; the others (a
-- run's admissions not yet written, batch.lua) are at t. It returns allowed, remaining, retry-after
-- and reset-after (µs); an allowed request is added at t.
local function sliding_log_check(key, now, W, L, n, t, c, newest, base, stored)
  if c + n > L then
    local retry, reset = NEVER, 0
    -- The (c+n-L)-th oldest live unit must expire first.
    if n <= L then
      local k, u = c + n - L, t
      if k <= stored then u = log_unit_at(key, t, W, base, k) end
      retry = u + W - now
    end
    if c > 0 then reset = newest + W - now end
    return false, math.max(0, L - c), retry, reset
  end
  return true, L - c - n, 0, t + W - now
end
