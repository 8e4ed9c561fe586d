-- sliding_window: the sliding window counter. Counters per epoch-aligned
-- window, as fixed_window; the estimate weights the previous window's count
-- by how much of it the sliding period still covers. The arithmetic follows
-- memory/algorithms.go operation for operation, so both stores agree.
local sliding_window = {}

local function window_key(key, w)
  return key .. ':' .. string.format('%d', w)
end

function sliding_window.check(key, now, a)
  local W, L, n = a.window, a.count, a.cost
  local w = math.floor(now / W)
  local elapsed = now - w * W
  local cur = tonumber(redis.call('GET', window_key(key, w)) or '0')
  local prev = tonumber(redis.call('GET', window_key(key, w - 1)) or '0')
  local est = prev * (W - elapsed) / W + cur
  local room = L - est
  local r = { wkey = window_key(key, w), ttl = 2 * W - elapsed }
  if room < n then
    r.rem = math.max(0, math.floor(room))
    if n > L then
      r.retry = NEVER
    elseif cur + n <= L then
      local at = W - (L - cur - n) * W / prev
      r.retry = math.ceil(at - elapsed)
    else
      local at = W - (L - n) * W / cur
      r.retry = W - elapsed + math.ceil(at)
    end
    r.reset = 0
    if cur > 0 then
      r.reset = 2 * W - elapsed
    elseif prev > 0 then
      r.reset = W - elapsed
    end
    return r
  end
  r.ok = true
  r.rem = math.max(0, math.floor(room - n))
  r.retry = 0
  r.reset = 2 * W - elapsed
  return r
end

sliding_window.commit = fixed_window.commit
sliding_window.refund = fixed_window.refund

function sliding_window.reset(key, now, a)
  local w = math.floor(now / a.window)
  redis.call('DEL', window_key(key, w), window_key(key, w - 1))
end
