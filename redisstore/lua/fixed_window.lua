-- fixed_window: a counter per window aligned to the epoch, in windows.lua's
-- hash (memory/algorithms.go, checkFixed). A count is live for its window.
local FIXED_WINDOW_SPAN = 1

-- fixed_window_of returns the window of now under W: its number from the
-- epoch, or for W < 0 a calendar period, named by its end (-W µs), which
-- the prelude's window picked. W = 0 is a calendar whose windows do not
-- hold now: the decision fails (SKEWED).
local function fixed_window_of(now, W)
  if W <= 0 then
    if W == 0 then error(SKEWED, 0) end
    return -W
  end
  return math.floor(now / W)
end

-- fixed_window_check decides a request of cost n at now under a limit of L
-- per window of W µs, on the key's latest window lw (nil for none) and its
-- count lc. It returns allowed, remaining, retry-after and reset-after
-- (µs), then the window the request is counted in and its count with it.
local function fixed_window_check(now, W, L, n, lw, lc)
  local w = fixed_window_of(now, W)
  local c = 0
  -- The key's window, or a later one if the clock went back before it.
  if lw ~= nil and lw >= w then w, c = lw, lc end
  local left = (w + 1) * W - now
  -- A calendar window ends at its name, after now.
  if W < 0 then left = w - now end
  if c + n > L then
    local retry, reset = left, 0
    if n > L then retry = NEVER end
    if c > 0 then reset = left end
    return false, math.max(0, L - c), retry, reset, w, c
  end
  return true, L - c - n, 0, left, w, c + n
end
