-- The sliding log's sorted set (memory/ring.go): one member per instant at
-- which requests were admitted, whatever their cost, scored by the time in
-- µs and named by cum, the units admitted on the key through that entry,
-- counted modulo 2^53. Its first member, "b" scored -inf, is the base, of
-- cum 0. The units of the entries after one are total - its cum, total
-- being the newest entry's cum: the count of the last period needs only
-- the newest entry and the one before the first live entry, each found in
-- O(log n). The entry at rank 0 is never live: the base, or the newest of
-- the expired entries, kept when older ones are trimmed.
--
-- Members are unique (cum only grows) and so are scores: a request is
-- stamped at the later of now and the newest time, and merged into the
-- newest entry when that is its instant, so times never go back and ranks
-- follow cum. An allowed request trims at most two entries expired before
-- the newest entry was made, and adds at most one: no call does unbounded
-- work, and the expired entries left behind shrink by one per request.
-- (Entries that expire only because the request moves the newest time on
-- stay until the next, so that a refund that takes the request out leaves
-- the log as it was.)
local LOG_CUM = 9007199254740992 -- 2^53

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

-- log_read returns the log of key as a request at now, under a period of
-- W µs, sees it:
--   t       the instant it is decided at: now, or the newest time if later
--   c       the live units: those of the entries after t - W
--   newest  the newest entry's time, top its member (nil for an empty set)
--   total   the newest entry's cum (0 for an empty set)
--   dead    how many of the first three entries expired before the newest
--           entry was made (all but the last of them may be trimmed)
--   rank    the first live entry's rank, base the cum before it, and
--           first its member and at its time when read (nil otherwise)
local function log_read(key, now, W)
  local t, c, total, dead = now, 0, 0, 0
  local front = redis.call('ZRANGE', key, '0', '2', 'WITHSCORES')
  if #front == 0 then return t, c, nil, nil, total, dead end
  local top, at = front[#front - 1], front[#front]
  if #front == 6 then
    local e = redis.call('ZRANGE', key, '-1', '-1', 'WITHSCORES')
    top, at = e[1], e[2]
  end
  local newest = tonumber(at)
  total = tonumber(top) or 0
  if newest > now then t = newest end
  local since, deadline = t - W, newest - W
  local rank, base, first
  at = nil
  for i = 2, #front, 2 do
    local score = tonumber(front[i])
    if score <= deadline then dead = i / 2 end
    if score > since and rank == nil then
      rank, base = i / 2 - 1, tonumber(front[i - 3]) or 0
      first, at = front[i - 1], score
    end
  end
  if rank == nil then
    -- Every entry has expired, or the live ones start past the front.
    if newest <= since then return t, c, newest, top, total, dead end
    rank = redis.call('ZCOUNT', key, '-inf', string.format('%d', since))
    local e = redis.call('ZRANGE', key, rank - 1, rank, 'WITHSCORES')
    base, first, at = tonumber(e[1]) or 0, e[3], tonumber(e[4])
  end
  c = log_units(base, total)
  return t, c, newest, top, total, dead, rank, base, first, at
end

-- log_unit_at returns the time of the k-th unit after base: the first
-- entry from rank (log_read's rank, base, first and at) whose cum is k
-- units past base. The entry is within the k entries from rank (each holds
-- a unit at least): a binary search by rank, each probe O(log n), whose
-- first probe is where the unit is when every entry holds one unit.
local function log_unit_at(key, rank, base, first, at, k)
  if log_units(base, tonumber(first)) >= k then return at end
  local lo, hi = rank, rank + k - 1
  local mid = hi - 1
  at = nil
  while hi - lo > 1 do
    local e = redis.call('ZRANGE', key, mid, mid, 'WITHSCORES')
    -- Past the set's end, the unit is before.
    if #e == 0 or log_units(base, tonumber(e[1])) >= k then
      hi, at = mid, e[2]
    else
      lo = mid
    end
    mid = math.floor((lo + hi) / 2)
  end
  if at == nil then
    at = redis.call('ZRANGE', key, hi, hi, 'WITHSCORES')[2]
  end
  return tonumber(at)
end

-- log_append is the sliding log's commit: it trims the dead entries
-- log_read found but the last of them, adds n units at t (a new entry, or
-- the newest one's, at newest with member top, if that is at t; a new set
-- starts with its base; total is the newest cum) and gives the set the
-- TTL ttl_ms.
local function log_append(key, dead, total, newest, top, t, n, ttl_ms)
  if dead > 1 then redis.call('ZREMRANGEBYRANK', key, 0, dead - 2) end
  local cum = string.format('%d', log_add(total, n))
  if newest == nil then
    redis.call('ZADD', key, '-inf', 'b', string.format('%d', t), cum)
  else
    if newest == t then redis.call('ZREM', key, top) end
    redis.call('ZADD', key, string.format('%d', t), cum)
  end
  redis.call('PEXPIRE', key, ttl_ms)
end
