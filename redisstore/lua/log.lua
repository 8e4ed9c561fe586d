-- The sliding log's sorted set (memory/ring.go): one member per instant
-- that admitted requests, whatever their cost. A member is scored by the
-- time in µs. It is named by cum: the units admitted on the key through
-- that entry, modulo 2^53. Its first member, "b" scored -inf, is the
-- base, of cum 0. total is the newest entry's cum. The units of the
-- entries after one are total - its cum. So the count of the last period
-- needs only two entries: the newest, and the one before the first live
-- entry. Each is found in O(log n). The entry at rank 0 is never live. It
-- is the base, or the newest expired entry, kept when older ones are
-- trimmed.
--
-- Members are unique (cum only grows), and so are scores. A request is
-- stamped at the later of now and the newest time. It is merged into the
-- newest entry when that is its instant. So times never go back, and
-- ranks follow cum. A write adds at most one entry. It trims a bounded
-- number of expired ones (see LOG_TRIM_EVERY). No call does unbounded
-- work.
local LOG_CUM = 9007199254740992 -- 2^53

-- call and format are redis.call and string.format, found once per call
-- of the script rather than once per use (two table lookups each).
local call, format = redis.call, string.format

-- log_units returns the units from cum a to cum b.
local function log_units(a, b)
  local d = b - a
  if d < 0 then d = d + LOG_CUM end
  return d
end

-- log_add returns cum + n modulo 2^53, without passing 2^53.
local function log_add(cum, n)
  if cum >= LOG_CUM - n then return cum - (LOG_CUM - n) end
  return cum + n
end

-- Trimming: some writes trim the entries that expired before the newest
-- entry was made, but the last of them. They are the writes that take the
-- cum past a multiple of LOG_TRIM_EVERY, or of the count if smaller. Each
-- trims at most LOG_TRIM_MOST - 1. So the work of one call stays bounded.
-- A write adds at most one entry, and trims at least that often. So an
-- active key keeps few expired entries: at most about its count, or
-- LOG_TRIM_EVERY. Each trim pays for several writes.
local LOG_TRIM_EVERY, LOG_TRIM_MOST = 8, 16
local LOG_NEG_INF = -math.huge -- the base's score

-- log_read returns the log of key as a request at now, under a period of
-- W µs, sees it:
--   - t: the instant it is decided at: now, or the newest time if later;
--   - c: the live units, those of the entries after t - W;
--   - newest: the newest entry's time; top: its member (nil for an empty
--     set);
--   - total: the newest entry's cum (0 for an empty set);
--   - base: the cum of the newest entry at or before t - W. It is nil when
--     every entry has expired;
--   - old: whether an entry besides the base is at or before t - W.
--     Otherwise a write trims nothing (log_append).
-- It makes two Redis calls whatever the log's length, reading one score.
-- They read the newest entry, and the last one that expired.
local function log_read(key, now, W)
  local e = call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
  if #e == 0 then return now, 0, nil, nil, 0, nil, false end
  -- A member is the base's 'b' or a cum as integer text, parsed once (x + 0;
  -- tonumber parses twice).
  local top = e[1]
  local newest, total = e[2] + 0, 0
  if top ~= 'b' then total = top + 0 end
  local t = now
  if newest > now then t = newest end
  if newest <= t - W then return t, 0, newest, top, total, nil, true end
  -- The base's member is 'b' (cum 0); a set without an entry before its
  -- live ones (none is made) would count them all: the strict side.
  local x = t - W
  local b = call('ZREVRANGEBYSCORE', key, texts[x] or str(x), '-inf', 'LIMIT', '0', '1')
  local base, old = b[1], true
  if base == nil or base == 'b' then base, old = 0, false else base = base + 0 end
  -- log_units(base, total), inline: a Lua function call costs about as
  -- much as parsing a number.
  local c = total - base
  if c < 0 then c = c + LOG_CUM end
  return t, c, newest, top, total, base, old
end

-- log_rank returns the rank of the first entry after since: the first live
-- entry's, when since is t - W.
local function log_rank(key, since)
  return call('ZCOUNT', key, '-inf', str(since))
end

-- LOG_SEARCH_WIDE is the k above which log_unit_at bounds its search by
-- the set's end (one call more) rather than by k entries on.
local LOG_SEARCH_WIDE = 16

-- log_unit_at returns the time of the k-th unit after base, on key's log
-- read at t under a period of W µs. t and base are log_read's; 1 <= k <= c.
-- That is the first live entry whose cum is k units past base. For k = 1,
-- it is the first live entry. Otherwise it is within the k entries from
-- the first live one: each holds a unit at least. It is at most the
-- newest, which holds the c-th unit. A binary search by rank finds it,
-- each probe O(log n). Its first probe is where the unit is when every
-- entry holds one unit. The newest entry's rank bounds a large k first.
-- A key in debt waits for a unit up to redlimit.MaxCost on, most often in
-- its newest entry. Without the bound, the search would take about
-- log2(k) probes past the set's end.
local function log_unit_at(key, t, W, base, k)
  if k == 1 then
    -- A live unit is in an entry after t - W; were there none (a log
    -- changed by hand), the newest entry's time: the strict side.
    local e = call('ZRANGEBYSCORE', key, '(' .. str(t - W), '+inf', 'WITHSCORES', 'LIMIT', '0', '1')
    return (e[2] or t) + 0
  end
  local rank = log_rank(key, t - W)
  local lo, hi = rank - 1, rank + k - 1
  if k > LOG_SEARCH_WIDE then hi = math.min(hi, call('ZCARD', key) - 1) end
  local mid = hi - 1
  local at
  while hi - lo > 1 do
    local e = call('ZRANGE', key, str(mid), str(mid), 'WITHSCORES')
    -- Past the set's end, the unit is before.
    if #e == 0 or log_units(base, e[1] + 0) >= k then
      hi, at = mid, e[2]
    else
      lo = mid
    end
    mid = math.floor((lo + hi) / 2)
  end
  if at == nil then
    at = call('ZRANGE', key, str(hi), str(hi), 'WITHSCORES')[2]
  end
  return at + 0
end

-- log_crosses reports whether a write of n units on cum, under a count of
-- L, takes it past a multiple of LOG_TRIM_EVERY, or of L if smaller. Such
-- a write trims (log_append). It returns the cum after the write too.
local function log_crosses(cum, n, L)
  -- log_add(cum, n), inline.
  local after = cum + n
  if cum >= LOG_CUM - n then after = cum - (LOG_CUM - n) end
  local every = LOG_TRIM_EVERY
  if L < every then every = L end
  -- x - x % every is x's multiple of every, rounded down (exact: integers
  -- below 2^53).
  return after - after % every ~= cum - cum % every, after
end

-- log_append is the sliding log's commit of n units, after log_read
-- (total, newest, top, t) under a period of W µs. It trims expired entries
-- (see LOG_TRIM_EVERY). It adds the n units at t: a new entry, or the
-- newest one's if that is at t. A new set starts with its base. It gives
-- the set a TTL that covers the new entry's period, t + W, plus the
-- margin. PEXPIREAT would cost Redis less. But a deployment's ACL user
-- would need it added before an upgrade (docs/BENCHMARKS.md). first says
-- whether the write trims (log_crosses). It is the write of them all, or
-- of the first admission of a batch's run (batch.lua). first is nil or
-- false when log_read found nothing old to trim. later says how many of
-- the run's other admissions trim. So the run trims what its calls one by
-- one would have.
local function log_append(key, W, total, newest, top, t, n, first, later)
  if (first or later > 0) and newest ~= nil and newest > LOG_NEG_INF then
    local gone = 0
    if first then
      -- Entries that expire only because t moved past the newest time
      -- stay, so that a refund that takes the request out leaves the log
      -- as it was.
      local x = log_rank(key, newest - W)
      if x > 1 then gone = math.min(x, LOG_TRIM_MOST) - 1 end
    end
    if later > 0 then
      -- A run's later admissions find the newest entry at t, the first's,
      -- and each trims up to LOG_TRIM_MOST - 1 of what expired by t - W.
      local x = log_rank(key, t - W) - gone
      for _ = 1, later do
        if x <= 1 then break end
        local g = math.min(x, LOG_TRIM_MOST) - 1
        gone, x = gone + g, x - g
      end
    end
    if gone > 0 then call('ZREMRANGEBYRANK', key, '0', str(gone - 1)) end
  end
  -- log_add(total, n), inline.
  local after = total + n
  if total >= LOG_CUM - n then after = total - (LOG_CUM - n) end
  local cum = format('%d', after)
  if newest == nil then
    call('ZADD', key, '-inf', 'b', str(t), cum)
  else
    if newest == t then call('ZREM', key, top) end
    call('ZADD', key, texts[t] or str(t), cum)
  end
  call('PEXPIRE', key, ms(t + W - now))
end
