-- The one decision script: a batch of entries, decided in the order given,
-- one after another, at one instant. The prelude reads TIME once. An entry
-- is what a call of the Store sends:
--   - one decision of one limit (AllowN, Peek), or a run of identical ones;
--   - a decision of several limits (AllowAll, Admit);
--   - a reset, a refund, or a debit counted once.
-- A lone call is a batch of one. The script runs atomically. So each entry
-- gets what it would get alone at that instant. script.go joins it after
-- the prelude, every algorithm's files, and loaders of the rest.
--
-- The arguments are laid out as redisstore/wire.go writes them:
-- ARGV[1]: the entries, three bytes each: kind, x, m. For ALLOW and PEEK,
-- x is the number of the entry's limit among the batch's limits. m is how
-- many identical decisions it holds. For the other kinds, x is the number
-- of limits and m is 1.
-- ARGV[2], ARGV[3]: the time and the TTL margin (prelude.lua).
-- ARGV[4]: s, the number of the batch's limits.
-- ARGV[5]: '' when the keys are KEYS. Otherwise their number, k; the keys
-- follow in ARGV[6 .. 5 + k]. That is a Cluster node's batch, whose keys
-- span several slots, with allow-cross-slot-keys. Redis checks only
-- KEYS[1] before the script runs.
-- Then the s limits, four values each:
--   - algorithm: 1 fixed_window, 2 sliding_log, 3 sliding_window,
--     4 token_bucket;
--   - window: µs, or a calendar's windows (see window); a token bucket's
--     emission interval µs;
--   - count; a token bucket's burst;
--   - cost.
-- Then each entry of another kind, in order, its values (see wire.go).
-- Keys: each entry's, in order. ALLOW and PEEK have one; the others x.
-- ONCE has two: the limit's and its marker's.
--
-- Reply, in order:
--   - now;
--   - each entry's values (see wire.go). An entry that failed on its key
--     answers nothing there;
--   - per entry that failed, its number and the kind of failure (see
--     key_failure);
--   - how many entries failed.
--
-- Redis did not check the keys in ARGV before the script ran. A script
-- that fails halfway keeps what it wrote. So before anything else, every
-- key of the batch is read (EXISTS). One may not be served here: its slot
-- moved, or is migrating and the key is gone. The script then answers
-- NOTOWNED and has written nothing. The store decides the batch again,
-- slot by slot (see redisstore/pernode.go).

-- one holds, by algorithm as text, each algorithm's <algorithm>_one. It
-- decides a decision alone on its key. several and more are the entry
-- functions of the other kinds (once.lua, refund.lua, lease.lua). The
-- first entry that needs one makes it. A script makes its functions anew
-- at each call, and a hot key's batch needs none.
local one, several, more, queued, lease

-- other decides entry kd (not ALLOW or PEEK) of x limits. Its keys follow
-- keys[k0], and its values start at ARGV[v]. It appends its values to out.
local function other(kd, x, keys, k0, v, out)
  if kd == SEVERAL or kd == ADMIT or kd == ONCE then
    if several == nil then several = load_several() end
    return several(kd, x, keys, k0, v, out)
  elseif kd == QUEUE or kd == UNQUEUE then
    if queued == nil then queued = load_queue() end
    return queued(kd, x, keys, k0, v, out)
  elseif kd == ACQUIRE or kd == RENEW or kd == RELEASE then
    if lease == nil then lease = load_lease() end
    return lease(kd, x, keys, k0, v, out)
  end
  if more == nil then more = load_more() end
  more(kd, x, keys, k0, v, out)
end

local raw = { string.byte(ARGV[1], 1, -1) }
local d = #raw / 3
local keys, j = KEYS, 6
if ARGV[5] ~= '' then keys, j = ARGV, 6 + tonumber(ARGV[5]) end

-- The batch's limits, by number: algorithm (as text), window, count and
-- cost, and the cost as text.
local salg, sW, sL, sn, scost = {}, {}, {}, {}, {}
local ns = tonumber(ARGV[4])
for l = 1, ns do
  local a = ARGV[j]
  if not known[a] then
    return redis.error_reply('ERR redlimit: unknown algorithm ' .. tostring(a))
  end
  salg[l], sW[l], sL[l], sn[l], scost[l] = a, window(ARGV[j + 1]), ARGV[j + 2] + 0, ARGV[j + 3] + 0, ARGV[j + 3]
  j = j + 4
end

-- kind[i] is entry i's kind, lim[i] its limit (ALLOW, PEEK) or number of
-- limits, rep[i] its m; kat[i] is the index in keys of its first key,
-- at[i] that in ARGV of its first value.
local kind, lim, rep, kat, at = {}, {}, {}, {}, {}
local k = 1
if keys == ARGV then k = 6 end
local k0 = k
for i = 1, d do
  local kd, x = raw[3 * i - 2], raw[3 * i - 1]
  kind[i], lim[i], rep[i], kat[i], at[i] = kd, x, raw[3 * i], k, j
  if kd == ALLOW or kd == PEEK then
    if salg[x] == nil then
      return redis.error_reply('ERR redlimit: unknown limit ' .. tostring(x))
    end
    k = k + 1
  else
    local n, e = sized(kd, x, j)
    if n == nil then return e end
    k, j = k + n, e
  end
end
if keys == ARGV then
  for i = k0, k - 1 do
    if (i == k0 or keys[i] ~= keys[i - 1]) and type(redis.pcall('EXISTS', keys[i])) == 'table' then
      return redis.error_reply('NOTOWNED redlimit: key ' .. (i - k0 + 1) .. ' of the batch is not served here')
    end
  end
end

-- A run is consecutive decisions on one key. The store puts them
-- together, in arrival order: decisions on different keys commute. An
-- entry of m is m of them. A run is decided on the state read once, and
-- written once. It writes what the calls of <algorithm>_one one after
-- another would have written:
--   - the window algorithms' hash gets one HINCRBY of the run's admitted
--     cost, with the retirement and TTL of the first admission that made
--     a new window;
--   - the bucket gets its last TAT, with the TTL of the last admission;
--   - a sliding log gets its admissions as one entry at t, the instant
--     they are all made at, with the TTL of the last. A log's key names
--     its period, so the run's decisions share it.
local out, o = { now }, 1

-- put..run_log decide entries of one limit on the state of their key read
-- once. load_runs makes them, for a batch that has such runs.
local put, admitted, denied, run_entry, run_windows, run_bucket, run_log
local function load_runs()
  -- put appends a decision's reply to out.
  function put(ok, rem, retry, reset)
    if ok then
      out[o + 1], out[o + 2] = rem, reset
      o = o + 2
    else
      out[o + 1], out[o + 2], out[o + 3] = -1 - rem, retry, reset
      o = o + 3
    end
  end

  -- admitted and denied append a segment of c decisions (see below).
  function admitted(c, rem, reset, drem, dreset)
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = c, rem, reset, drem, dreset
    o = o + 5
  end
  function denied(c, rem, retry, reset)
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = -c, rem, retry, reset
    o = o + 4
  end

  -- The replies of an entry of m > 1 identical decisions go in segments.
  -- Each covers the next c of its decisions, in order:
  --   c, remaining, reset-after, and the steps of both from one decision
  --   to the next: c allowed decisions. The j-th (from 0) has remaining +
  --   j * step and reset-after + j * step;
  --   -c, remaining, retry-after, reset-after: c denied decisions, the same.
  -- A hot key's decisions then cost Redis a segment's values, not two or
  -- three each. They cost the decision of two costs, not one per decision.
  --
  -- run_entry decides entry k's m decisions with try and commit.
  -- try(l, n) decides a request of limit l and cost n on the run's state
  -- as read and changed so far. It returns allowed, remaining,
  -- retry-after, reset-after, then what commit needs. commit(l, n, reset,
  -- ...) changes that state as an admission of it does. run_entry relies
  -- on what every algorithm's check does at one instant. A denied request,
  -- or a peek, changes nothing, so the decisions after it are decided the
  -- same. Admitting costs a and then b leaves the state that admitting
  -- a + b at once does. The second is admitted exactly when a + b would
  -- be, with what a + b answers. So once the first is admitted, the other
  -- m - 1 are all admitted if they would be as one. The last answers what
  -- the one does. Each takes its cost from the remaining. Each moves the
  -- reset-after by the same step: a token bucket's by its cost's
  -- emission, the others' not at all. Otherwise they are decided one by
  -- one, each allowed decision a segment of its own. At its limit, a key
  -- admits a few, then one denial answers the rest.
  function run_entry(k, try, commit)
    local l = lim[k]
    local n, m, allow = sn[l], rep[k], kind[k] == ALLOW
    local ok, rem, retry, reset, x, y, z = try(l, n)
    if ok and allow then commit(l, n, reset, x, y, z) end
    if m == 1 then
      put(ok, rem, retry, reset)
      return
    end
    if not ok then
      denied(m, rem, retry, reset)
      return
    end
    if not allow then
      admitted(m, rem, reset, 0, 0)
      return
    end
    local rest = (m - 1) * n
    local ok2, rem2, _, reset2, x2, y2, z2 = try(l, rest)
    local drem, dreset = (rem2 - rem) / (m - 1), (reset2 - reset) / (m - 1)
    -- Steps that are not whole would say the check breaks the rule above:
    -- the decisions then go one by one, exact whatever the check.
    if ok2 and drem % 1 == 0 and dreset % 1 == 0 then
      commit(l, rest, reset2, x2, y2, z2)
      admitted(m, rem, reset, drem, dreset)
      return
    end
    admitted(1, rem, reset, 0, 0)
    for j = 2, m do
      ok, rem, retry, reset, x, y, z = try(l, n)
      if not ok then
        denied(m - j + 1, rem, retry, reset)
        return
      end
      commit(l, n, reset, x, y, z)
      admitted(1, rem, reset, 0, 0)
    end
  end

  -- run_windows decides entries i..e on the window hash key with check
  -- (fixed_window_check or sliding_window_check) and span.
  function run_windows(key, i, e, check, span)
    local lw, lc, pc, h = windows_read(key)
    local w0, add, ttl = lw, 0, nil
    local function try(l, n) return check(now, sW[l], sL[l], n, lw, lc, pc) end
    local function commit(l, n, reset, w, c, p)
      if w ~= lw then ttl = reset end
      lw, lc, add = w, c, add + n
      if p ~= nil then pc = p end
    end
    for k = i, e do run_entry(k, try, commit) end
    if add == 0 then return end
    if lw ~= w0 then windows_retire(key, h, lw - span + 1) end
    redis.call('HINCRBY', key, str(lw), add)
    if ttl ~= nil then redis.call('PEXPIRE', key, ms(ttl)) end
  end

  -- run_bucket decides entries i..e on the token bucket key.
  function run_bucket(key, i, e)
    local tat, given, last, epoch = token_bucket_read(redis.call('GET', key))
    local ttl
    local function try(l, n) return token_bucket_check(now, sW[l], sL[l], n, tat) end
    local function commit(l, n, reset, t) tat, ttl = t, reset end
    for k = i, e do run_entry(k, try, commit) end
    if ttl ~= nil then redis.call('SET', key, token_bucket_value(tat, given, last, epoch, now), 'PX', ms(ttl)) end
  end

  -- run_log decides entries i..e on the sliding log key, whose period is
  -- W. Its admissions are one write. It trims as their writes one by one
  -- would have: first and later (log_append). They are counted per
  -- admission, of its own cost and count, when the log has something old
  -- to trim.
  function run_log(key, i, e, W)
    local t, c, newest, top, total, base, old = log_read(key, now, W)
    local stored, last, add, seen = c, newest, 0, {}
    local cum, first, later = total, nil, 0
    local function try(l, n) return sliding_log_check(key, now, W, sL[l], n, t, c, last, base, stored, seen) end
    local function commit(l, n)
      c, last, add = c + n, t, add + n
      if not old then return end
      local each, L = sn[l], sL[l]
      for _ = 1, n / each do
        local crosses
        crosses, cum = log_crosses(cum, each, L)
        if first == nil then first = crosses elseif crosses then later = later + 1 end
      end
    end
    for k = i, e do run_entry(k, try, commit) end
    if add > 0 then log_append(key, W, total, newest, top, t, add, first, later) end
  end
end

-- fails lists the entries that failed on their key (key_failure), each
-- with its kind; they answer nothing in out. An entry fails alone, and
-- writes nothing: every path reads its keys before it writes.
local fails = {}
local function failed(i, e, o0, err)
  local kind = key_failure(err)
  for x = o0 + 1, #out do out[x] = nil end
  o = o0
  for k = i, e do
    fails[#fails + 1] = k
    fails[#fails + 1] = kind
  end
end

local i = 1
while i <= d do
  local kd, o0 = kind[i], o
  if kd ~= ALLOW and kd ~= PEEK then
    local fine, err = pcall(other, kd, lim[i], keys, kat[i] - 1, at[i], out)
    o = #out
    if not fine then failed(i, i, o0, err) end
    i = i + 1
  else
    local l = lim[i]
    local key, alg = keys[kat[i]], salg[l]
    local e = i
    while e < d and (kind[e + 1] == ALLOW or kind[e + 1] == PEEK) and keys[kat[e + 1]] == key and salg[lim[e + 1]] == alg do e = e + 1 end
    local run = e > i or rep[i] > 1
    local fine, err = true, nil
    if run and run_entry == nil then load_runs() end
    if run and alg == '1' then
      fine, err = pcall(run_windows, key, i, e, fixed_window_check, FIXED_WINDOW_SPAN)
    elseif run and alg == '3' then
      fine, err = pcall(run_windows, key, i, e, sliding_window_check, SLIDING_WINDOW_SPAN)
    elseif run and alg == '4' then
      fine, err = pcall(run_bucket, key, i, e)
    elseif run and alg == '2' then
      fine, err = pcall(run_log, key, i, e, sW[l])
    else
      if one == nil then
        local f1, f2, f3, f4 = load_one()
        one = { ['1'] = f1, ['2'] = f2, ['3'] = f3, ['4'] = f4 }
      end
      local alone = one[alg]
      for k = i, e do
        local l = lim[k]
        -- put, inline.
        local ok1, ok, rem, retry, reset = pcall(alone, key, kind[k] == ALLOW, sW[l], sL[l], sn[l], scost[l])
        if not ok1 then
          failed(k, k, o, ok)
        elseif ok then
          out[o + 1], out[o + 2] = rem, reset
          o = o + 2
        else
          out[o + 1], out[o + 2], out[o + 3] = -1 - rem, retry, reset
          o = o + 3
        end
      end
    end
    if not fine then failed(i, e, o0, err) end
    i = e + 1
  end
end
for x = 1, #fails do out[o + x] = fails[x] end
out[o + #fails + 1] = #fails / 2
return out
