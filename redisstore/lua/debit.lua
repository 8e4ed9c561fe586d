-- Debits (redlimit.Request.Debit, DEBITS.md), one function per algorithm,
-- from the state read to the result and what to write. A debit is counted
-- whether it fits or not, up to the saturation bounds below. The bounds
-- take the request's limit at the time of the debit. Its result describes
-- the key after it. If it fit, it is allowed, and the result is the
-- admission's. Otherwise it is what the algorithm's check answers for the
-- same cost on the state after it. Only the decision script joins this
-- file. So the single-limit scripts do not make these functions at every
-- call.
local MAX_COST = 1099511627776 -- redlimit.MaxCost, 2^40
local MAX_PERIOD = 316224000000000 -- redlimit.MaxPeriod in µs

-- debit_units returns how many of a debit's n units a count c may take
-- under a limit of L: min(n, L + MAX_COST - c), nothing if c is already
-- at or above that bound.
local function debit_units(L, c, n)
  local room = L + MAX_COST - c
  if room <= 0 then return 0 end
  if n < room then return n end
  return room
end

-- fixed_window_debit decides a debit of n as fixed_window_check does, and
-- returns fit, remaining, retry-after, reset-after, the window counted in
-- and the units added to it.
local function fixed_window_debit(now, W, L, n, lw, lc)
  local ok, rem, retry, reset, w, c = fixed_window_check(now, W, L, n, lw, lc)
  if ok then return ok, rem, retry, reset, w, n end
  local add = debit_units(L, c, n)
  ok, rem, retry, reset = fixed_window_check(now, W, L, n, w, c + add)
  return false, rem, retry, reset, w, add
end

-- sliding_window_debit is fixed_window_debit for sliding_window_check.
local function sliding_window_debit(now, W, L, n, lw, lc, pc)
  local ok, rem, retry, reset, w, cur, prev = sliding_window_check(now, W, L, n, lw, lc, pc)
  if ok then return ok, rem, retry, reset, w, n end
  local add = debit_units(L, cur, n)
  ok, rem, retry, reset = sliding_window_check(now, W, L, n, w, cur + add, prev)
  return false, rem, retry, reset, w, add
end

-- sliding_log_debit decides a debit of n on key's log, as log_read read
-- it. It returns fit, remaining, retry-after, reset-after and the units
-- to add at t. The live units c go at most up to L + MAX_COST. A debit
-- that does not fit waits for the (c'+n-L)-th live unit of the log after
-- it; c' is the live units then. That unit is the new entry's, at t, or
-- one of the log as read.
local function sliding_log_debit(key, now, W, L, n, t, c, newest, base)
  if c + n <= L then
    local ok, rem, retry, reset = sliding_log_check(key, now, W, L, n, t, c, newest, base, c)
    return ok, rem, retry, reset, n
  end
  local add = debit_units(L, c, n)
  local after = c + add
  local retry = NEVER
  if n <= L then
    local k = after + n - L
    local u = t
    if k <= c then u = log_unit_at(key, t, W, base, k) end
    retry = u + W - now
  end
  if add > 0 then newest = t end
  return false, math.max(0, L - after), retry, newest + W - now, add
end

local LOG_MERGES = 2 -- the most entries one debit merges

-- sliding_log_merges returns the members a debit of add units at t merges
-- away. It follows log_read (t, c, newest, top, total) under a period of
-- W µs. The oldest live entry is merged into the next one, at most
-- LOG_MERGES times. That happens while the entries after it, the debit's
-- included, hold at least L units. Such an entry cannot change a
-- decision. While the entries after it live, the key is denied. A
-- denial's retry-after waits for a unit after it. And it expires before
-- them. In the cum encoding, deleting its member moves its units into the
-- next entry. An entry that expired is never merged; it is only trimmed.
-- Nor is the one the debit adds to.
--
-- Under a fixed L, a log thus keeps at most L live entries, as admissions
-- do. Of L + 1, the oldest has L units after it. Beside them are the
-- expired ones log_append has not trimmed yet (log.lua). After L was
-- lowered, a write leaves one member fewer until the log is back within.
--
-- With L raised later, merged units stay live longer than in an exact
-- log. A merge is exact for the count it was made under, strict above it.
local function sliding_log_merges(key, L, W, t, c, newest, top, total, add)
  if c == 0 then return nil end
  local rank = log_rank(key, t - W)
  local after = log_add(total, add)
  local gone = {}
  for i = 0, LOG_MERGES - 1 do
    local member = redis.call('ZRANGE', key, str(rank + i), str(rank + i))[1]
    if member == nil then break end
    if member == top and newest == t then break end
    if log_units(tonumber(member), after) < L then break end
    gone[#gone + 1] = member
  end
  if #gone == 0 then return nil end
  return gone
end

-- token_bucket_debit decides a debit of n as token_bucket_check does. It
-- returns fit, remaining, retry-after, reset-after, the TAT to write (nil
-- for none), and whether the debit reached the bound. The TAT moves by
-- n * ei, to at most now + tau + MAX_PERIOD and 2^53. One already beyond
-- that stays: the clock went back. n * ei can be near 2^88. So n is
-- compared with the room in whole intervals first.
local function token_bucket_debit(now, ei, burst, n, tat)
  local ok, rem, retry, reset, nxt = token_bucket_check(now, ei, burst, n, tat)
  if ok then return ok, rem, retry, reset, nxt end
  local d = tat - now
  if d < 0 then d = 0 end
  -- The TAT stays at most 2^53 µs after the epoch, which a number holds.
  local bound = math.min(burst * ei + MAX_PERIOD, 9007199254740992 - now)
  local room = bound - d
  if room <= 0 then return false, rem, retry, reset, nil, true end
  -- q = floor(room / ei), exactly: the division rounds to at most one above.
  local q = math.floor(room / ei)
  if q * ei > room then q = q - 1 end
  local due = bound
  if n <= q then due = d + n * ei end
  ok, rem, retry, reset = token_bucket_check(now, ei, burst, n, now + due)
  return false, rem, retry, reset, now + due, n > q
end
