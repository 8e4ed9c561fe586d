-- sliding_window: the sliding window counter, in windows.lua's hash. The
-- estimate weighs the previous window's count by how much of it the
-- sliding period still covers, rounded up to a whole request. The
-- arithmetic follows memory/algorithms.go (checkSliding) operation for
-- operation, exact (muldiv.lua), so both stores agree. A count is live
-- for its window and the next.
local SLIDING_WINDOW_SPAN = 2

-- sliding_window_check decides a request of cost n at now under a limit of
-- L per W µs. It reads the key's latest window lw (nil for none), its
-- count lc, and the count pc of the window before it. It returns allowed, remaining,
-- retry-after and reset-after (µs), then the window the request is
-- counted in, its count with it and the count of the window before it.
local function sliding_window_check(now, W, L, n, lw, lc, pc)
  local w = math.floor(now / W)
  local cur, prev = 0, 0
  if lw ~= nil then
    if lw >= w then
      -- The key's window, or a later one if the clock went back before it,
      -- entered at its start.
      w, cur, prev = lw, lc, pc
    elseif lw == w - 1 then
      prev = lc
    end
  end
  local start = w * W
  local elapsed = math.max(now, start) - start
  local weighted, rest = muldiv(prev, W - elapsed, W)
  if rest > 0 then weighted = weighted + 1 end
  local room = L - cur - weighted
  if room < n then
    local retry, reset
    if n > L then
      retry = NEVER
    elseif cur + n <= L then
      -- The previous window's weight must fall to L - cur - n.
      retry = start + W - muldiv(L - cur - n, W, prev) - now
    else
      -- Only in the next window, as this one's count fades to L - n.
      retry = start + 2 * W - muldiv(L - n, W, cur) - now
    end
    reset = 0
    if cur > 0 then
      reset = start + 2 * W - now
    elseif prev > 0 then
      reset = start + W - now
    end
    return false, math.max(0, room), retry, reset, w, cur, prev
  end
  return true, room - n, 0, start + 2 * W - now, w, cur + n, prev
end
