-- sliding_log: the log of log.lua (memory/algorithms.go, checkLog). Exact: a
-- request of cost n passes while the units admitted in the period before
-- it, plus n, stay within the count.

-- sliding_log_check decides a request of cost n at now under a limit of L
-- per W µs on key's log, as log_read read it: t, c, newest, and base.
-- With them, a denial finds when the units it waits for expire
-- (log_unit_at). Of the c live units, the oldest stored are in the log.
-- The others are at t: a run's admissions not yet written (batch.lua).
-- seen, if not nil, holds the times log_unit_at found on this read of the
-- log, by unit. A run's decisions share the read. The denials of a hot key
-- wait for the same unit. It returns allowed, remaining, retry-after and
-- reset-after (µs). An allowed request is added at t.
local function sliding_log_check(key, now, W, L, n, t, c, newest, base, stored, seen)
  if c + n > L then
    local retry, reset = NEVER, 0
    -- The (c+n-L)-th oldest live unit must expire first.
    if n <= L then
      local k, u = c + n - L, t
      if k <= stored then
        u = seen and seen[k]
        if not u then
          u = log_unit_at(key, t, W, base, k)
          if seen then seen[k] = u end
        end
      end
      retry = u + W - now
    end
    if c > 0 then reset = newest + W - now end
    return false, math.max(0, L - c), retry, reset
  end
  return true, L - c - n, 0, t + W - now
end
