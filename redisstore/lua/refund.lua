-- Resets and refunds (see redisstore/refund.go). batch.lua calls
-- change_limits for each such entry. There is one refund per algorithm.
-- Each gives back what an allowed request of cost n consumed. It finds
-- that from its mark: the decision time plus the reset-after the allow
-- replied. batch.lua makes these functions only for a call that needs
-- them.

-- windows_refund is the refund of the window algorithms. It takes a
-- request of cost n out of the count of the window it was counted in. The
-- mark (the reset-after of the allow) finds it: span windows of W µs
-- after that window's start. The window holds the cost, so nothing else
-- is given back. A latest window it empties is deleted, and the windows
-- its making retired come back. A retired window it is found in keeps the
-- rest.
local function windows_refund(key, W, span, n, mark)
  local w = mark / W - span
  if W <= 0 then w = mark end -- a calendar window, named by its end
  local field = str(w)
  local c = tonumber(redis.call('HGET', key, field) or '0')
  if c == 0 then
    field = 'p' .. field
    c = tonumber(redis.call('HGET', key, field) or '0')
  end
  if c < n then return end
  if c > n then
    redis.call('HINCRBY', key, field, -n)
    return
  end
  redis.call('HDEL', key, field)
  if string.sub(field, 1, 1) == 'p' then return end
  local lw, _, _, h = windows_read(key)
  if lw ~= nil and lw > w then return end
  local back = { 'HSET', key }
  local gone = {}
  for i = 1, #h, 2 do
    if string.sub(h[i], 1, 1) == 'p' then
      gone[#gone + 1] = h[i]
      back[#back + 1] = string.sub(h[i], 2)
      back[#back + 1] = h[i + 1]
    end
  end
  if #gone > 0 then
    redis.call('HDEL', key, unpack(gone))
    redis.call(unpack(back))
  end
end

local LOG_REFUND = 64 -- the most entries a sliding log's refund rewrites

-- expire_before makes the entries of key's log at or before t expired,
-- whatever the time of the decisions to come. It trims them but the last,
-- which becomes the base, scored -inf. With more than LOG_TRIM_MOST of
-- them, they stay as they are: the work of one call stays bounded.
local function expire_before(key, t)
  local k = redis.call('ZCOUNT', key, '-inf', str(t))
  if k < 1 or k > LOG_TRIM_MOST then return end
  if k > 1 then redis.call('ZREMRANGEBYRANK', key, '0', str(k - 2)) end
  local b = redis.call('ZRANGE', key, '0', '0')[1]
  if b ~= 'b' then redis.call('ZADD', key, '-inf', b) end
end

-- sliding_log_refund takes a request of cost n out of the entry at its
-- time, if all of it is still there. The time is the mark less the window
-- W. It moves the cum of the entries after it down by the cost, so their
-- counts stay: exact. There may be more than LOG_REFUND entries after it:
-- a key that admitted that many requests between the allow and the
-- refund. The rewrite would then be unbounded, so the refund gives
-- nothing back: strict. An entry holding less than the cost was trimmed
-- or reset since.
--
-- A group's 'refund' leaves the log as if the group had never been
-- decided. The memory store decides the groups together, and never wrote
-- it. A 'giveback' (Store.Refund) may take out the newest entry. It then
-- leaves expired what had expired at that entry's time, whatever time
-- comes next (a clock that steps back). The memory store does the same:
-- it trimmed them when it added the entry (expire_before).
local function sliding_log_refund(key, W, n, mark, giveback)
  local stamp = mark - W
  local es = redis.call('ZRANGEBYSCORE', key, str(stamp), '+inf', 'WITHSCORES', 'LIMIT', 0, LOG_REFUND + 2)
  if #es == 0 or tonumber(es[2]) ~= stamp or #es > 2 * (LOG_REFUND + 1) then return end
  local before = redis.call('ZREVRANGEBYSCORE', key, '(' .. str(stamp), '-inf', 'LIMIT', 0, 1)
  if #before == 0 then return end
  local x, cum = n, tonumber(es[1])
  local units = log_units(tonumber(before[1]) or 0, cum)
  if units < x then return end
  local gone, adds = {}, { 'ZADD', key }
  for i = 1, #es, 2 do gone[#gone + 1] = es[i] end
  if units > x then
    adds[#adds + 1] = es[2]
    adds[#adds + 1] = string.format('%d', log_units(x, cum))
  end
  for i = 3, #es, 2 do
    adds[#adds + 1] = es[i + 1]
    adds[#adds + 1] = string.format('%d', log_units(x, tonumber(es[i])))
  end
  redis.call('ZREM', key, unpack(gone))
  if #adds > 2 then redis.call(unpack(adds)) end
  if giveback and #es == 2 and units == x then expire_before(key, stamp - W) end
end

-- token_bucket_lower lowers the TAT y of a bucket's key by b at now. It
-- counts b in the key's refund record (token_bucket.lua), if it has one.
-- token_bucket_giveback's rule needs every refund counted in given. given
-- stays an exact number: past 2^52, a new epoch begins.
local function token_bucket_lower(key, now, y, b, given, last, epoch)
  if given ~= nil then
    given = given + b
    if given > 4503599627370496 then given, epoch = 0, math.max(now, epoch + 1) end
  end
  -- Even a TAT now past is kept, for a millisecond and the margin. A
  -- clock that goes back finds the bucket as the decision left it.
  redis.call('SET', key, token_bucket_value(y - b, given, last, epoch, 0), 'PX', ms(y - b - now))
end

-- token_bucket_refund is the 'refund' of a group right after another
-- group of a split decision denied. y is the TAT now. mark is the TAT the
-- allow wrote (nxt). c = n * ei is the cost in µs. An allow moves the TAT
-- T to max(T, t) + cost. That maps a TAT c earlier to one between 0 and c
-- earlier. Without the request, the allows since would have left the TAT
-- at least y - c. They took y - nxt and came no later than now. So they
-- would have left it at most max(y - c, now + (y - nxt)). The refund sets
-- that. It is exact when nothing came in between (y = nxt): the TAT the
-- bucket had, or now. It is never below the truth when only allows came.
-- Other refunds in between lower y without their requests' share of
-- y - nxt. If the bucket was idle at one of the allows since, up to
-- min(c, what they gave back) more is then given back (see
-- redisstore/refund.go). It needs no record: a split decision's groups
-- make none.
local function token_bucket_refund(key, now, ei, n, mark)
  local y, given, last, epoch = token_bucket_read(redis.call('GET', key))
  if y <= now then return end
  local back = math.max(y - n * ei, now + (y - mark))
  if back >= y then return end
  token_bucket_lower(key, now, y, y - back, given, last, epoch)
end

-- token_bucket_giveback is the 'giveback' (Store.Refund) of n tokens
-- (n * ei µs) of a request that Store.Admit counted. Its admission left
-- the TAT at mark, and the refund record (token_bucket.lua) at given gx
-- and epoch ex. It lowers the TAT y by
--   b = min(n * ei, mark - (given - gx) - last, y - now).
-- It lowers nothing when b <= 0. Nor does it when the key has no record
-- of epoch ex: reset, expired, or a debit reached the bound since. The
-- exact account is the TAT with the request costing n * ei less, and
-- every other refund applied so. b is a shift of its cost that every
-- admission since passes whole. Each found the TAT at least b after its
-- instant. The key is left exactly where the account is with the request
-- costing b less. That is never below the exact account; the proof is
-- memory.refundable's. b = n * ei in three cases: nothing came in
-- between; only other refunds did; or the admissions between found the
-- bucket ahead of them by more than the refund and the refunds since.
local function token_bucket_giveback(key, now, ei, n, mark, gx, ex)
  local y, given, last, epoch = token_bucket_read(redis.call('GET', key))
  if given == nil or epoch ~= ex then return end
  local b = math.min(n * ei, mark - (given - gx) - last, y - now)
  if b <= 0 then return end
  token_bucket_lower(key, now, y, b, given, last, epoch)
end

-- reset_limit deletes key, of algorithm alg (window W; a token bucket's
-- burst and emission interval ei). It leaves a tombstone beside it,
-- holding the key's reset generation. Each reset makes a new generation,
-- never 0 (no reset). The tombstone lives as long as a refund of a
-- request decided before it could still find a state to take from. That
-- is the key's TTL, and at least the longest a request's mark lies after
-- its decision: two windows, or a token bucket's tolerance. An admission
-- records the generation it found (several.lua). A refund gives back only
-- in that generation: the reset gave the request's cost back already.
-- Generations, not times, order resets and admissions. So clocks that
-- differ or go back change nothing. A new generation is the last plus 1,
-- or the reset's time when that is more. So one made after a tombstone
-- expired does not repeat an older one. A tombstone never lives shorter
-- than the one it replaces: a calendar reset whose windows miss now
-- (W = 0) knows no window end.
local function reset_limit(key, alg, W, burst, ei)
  local span = 2 * W
  -- A calendar window, up to its end; the key's TTL covers the rest.
  if W <= 0 then span = -W - now end
  if alg == TOKEN_BUCKET then span = burst * ei end
  local tomb = key .. ':reset'
  local ttl = ms(span)
  local left = math.max(redis.call('PTTL', key), redis.call('PTTL', tomb))
  if left > tonumber(ttl) then ttl = str(left) end
  local gen = math.max(tonumber(redis.call('GET', tomb) or '0') + 1, now)
  redis.call('SET', tomb, str(gen), 'PX', ttl)
  redis.call('DEL', key)
end

-- change_limits resets (reset) or refunds n limits. Limit i's key is
-- keys[k0 + i]. Its seven values follow args[v] (see several.lua). For a
-- refund, the seventh is the request's mark. A refund's args[v] is the
-- time the requests were decided at; the time is never taken below it. A
-- give-back (Store.Refund) has three more values per limit, after them
-- all. For a token bucket, they are the given and epoch of the refund
-- record its admission left. Then comes the key's reset generation at the
-- admission. All three come from the Admit's reply. A refund of an
-- allowed group, right after another group denied, takes no heed of
-- resets. A give-back gives nothing back after a reset since the
-- admission: the key's generation is not the one the admission found.
local function change_limits(reset, giveback, keys, k0, n, args, v)
  if reset then
    for i = 1, n do
      local j = v + 7 * (i - 1)
      reset_limit(keys[k0 + i], tonumber(args[j]), window(args[j + 1]), tonumber(args[j + 3]), tonumber(args[j + 4]))
    end
    return
  end
  local t = math.max(now, tonumber(args[v]))
  for i = 1, n do
    local j = v + 1 + 7 * (i - 1)
    local key, alg, W, c, mark = keys[k0 + i], tonumber(args[j]), window(args[j + 1]), tonumber(args[j + 5]), tonumber(args[j + 6])
    local r = v + 1 + 7 * n + 3 * (i - 1)
    local gone = false
    if giveback then gone = tonumber(redis.call('GET', key .. ':reset') or '0') ~= tonumber(args[r + 2]) end
    if gone or mark <= t then
      -- Reset since the decision, or the request's state has expired.
    elseif alg == FIXED_WINDOW then
      windows_refund(key, W, FIXED_WINDOW_SPAN, c, mark)
    elseif alg == SLIDING_LOG then
      sliding_log_refund(key, W, c, mark, giveback)
    elseif alg == SLIDING_WINDOW then
      windows_refund(key, W, SLIDING_WINDOW_SPAN, c, mark)
    elseif not giveback then
      token_bucket_refund(key, t, tonumber(args[j + 4]), c, mark)
    else
      token_bucket_giveback(key, t, tonumber(args[j + 4]), c, mark, tonumber(args[r]), tonumber(args[r + 1]))
    end
  end
end

-- entry decides an entry of kind RESET, REFUND or GIVEBACK (batch.lua) of
-- x limits, whose keys follow keys[k0] and whose values start at ARGV[v].
local function entry(kd, x, keys, k0, v, out)
  change_limits(kd == RESET, kd == GIVEBACK, keys, k0, x, ARGV, v)
end
