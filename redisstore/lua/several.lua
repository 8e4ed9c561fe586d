-- The decision of several limits at once (AllowAll, Admit), with debits:
-- decide_limits, which batch.lua calls for each such entry. Joined after
-- the prelude, every algorithm's files and debit.lua.

-- windows_add is the commit of the window algorithms: it counts cost (as
-- text) in window w of key, whose latest window was lw and hash h
-- (windows_read). span is how many windows a count stays live (the
-- algorithm's *_SPAN). The call that makes w the latest retires the live
-- windows before the span (windows_retire) and gives the hash its TTL,
-- ttl_ms, which ends with the span: the same instant for every later call
-- in it.
local function windows_add(key, h, lw, w, span, cost, ttl_ms)
  if lw ~= w then windows_retire(key, h, w - span + 1) end
  redis.call('HINCRBY', key, str(w), cost)
  if lw ~= w then redis.call('PEXPIRE', key, ttl_ms) end
end

-- decide_limits decides one request of n limits at now: limit i's key is
-- keys[k0 + i] and its seven values (algorithm, window µs, count, burst,
-- emission interval µs, cost, 1 for a debit or 0 for an admission) are
-- args[a0 + 7(i-1) + 1 .. a0 + 7i]. It appends four values per limit to
-- out: allowed (1/0), remaining, retry-after µs (-1 for never), reset-after
-- µs. With allow, it counts the admissions only if every limit allows, and
-- the debits whatever the others say (debit.lua); without, it writes
-- nothing and decides debits as admissions (a peek). It returns whether
-- every limit allowed. The algorithms are checked by the caller. With
-- admit (Store.Admit; with allow), each token bucket it counts an
-- admission in gets a refund record if it has none (token_bucket.lua), and
-- three more values per limit follow all the others in out: for a token
-- bucket that counted the admission, its record's given and epoch (0 and
-- 0 for the rest), then the key's reset generation (refund.lua), 0 for
-- none or a denial.
local function decide_limits(allow, keys, k0, n, args, a0, out, admit)
  -- Every limit is checked on the state read; writes[i] keeps what limit
  -- i's commit needs: for an admission, when all allow; for a debit,
  -- always, and adds[i] the units it adds (nothing is written for none,
  -- at the saturation bound); recs[i], a token bucket's refund record.
  local o, writes, adds, recs, all = #out, {}, {}, {}, true
  for i = 1, n do
    local j = a0 + (i - 1) * 7
    local key, alg, W, L, n = keys[k0 + i], tonumber(args[j + 1]), window(args[j + 2]), tonumber(args[j + 3]), tonumber(args[j + 6])
    local debit = allow and args[j + 7] == '1'
    local ok, rem, retry, reset, add
    if alg == FIXED_WINDOW or alg == SLIDING_WINDOW then
      local lw, lc, pc, h = windows_read(key)
      local w
      if debit then
        if alg == FIXED_WINDOW then
          ok, rem, retry, reset, w, add = fixed_window_debit(now, W, L, n, lw, lc)
        else
          ok, rem, retry, reset, w, add = sliding_window_debit(now, W, L, n, lw, lc, pc)
        end
      elseif alg == FIXED_WINDOW then
        ok, rem, retry, reset, w = fixed_window_check(now, W, L, n, lw, lc)
      else
        ok, rem, retry, reset, w = sliding_window_check(now, W, L, n, lw, lc, pc)
      end
      writes[i] = { h, lw, w }
    elseif alg == SLIDING_LOG then
      local t, c, newest, top, total, base, old = log_read(key, now, W)
      local merges
      if debit then
        ok, rem, retry, reset, add = sliding_log_debit(key, now, W, L, n, t, c, newest, base)
        if add > 0 then merges = sliding_log_merges(key, L, W, t, c, newest, top, total, add) end
      else
        ok, rem, retry, reset = sliding_log_check(key, now, W, L, n, t, c, newest, base, c)
      end
      writes[i] = { total, newest, top, t, merges, old }
    else
      local tat, given, last, epoch = token_bucket_read(redis.call('GET', key))
      local nxt, cut
      if debit then
        ok, rem, retry, reset, nxt, cut = token_bucket_debit(now, tonumber(args[j + 5]), tonumber(args[j + 4]), n, tat)
        if cut and given then
          -- At the debt bound the TAT no longer depends on what came
          -- before: a new epoch, in which no earlier admission is refunded.
          given, epoch = 0, math.max(now, epoch + 1)
          nxt = nxt or tat
        end
        add = nxt and 1 or 0
      else
        ok, rem, retry, reset, nxt = token_bucket_check(now, tonumber(args[j + 5]), tonumber(args[j + 4]), n, tat)
        if admit and given == nil then given, last, epoch = 0, now, now end
      end
      writes[i] = nxt
      if given then recs[i] = { given, last, epoch } end
    end
    if debit then
      if add == 0 then writes[i] = false end
      adds[i] = add
    end
    all = all and ok
    out[#out + 1] = ok and 1 or 0
    out[#out + 1] = rem
    out[#out + 1] = retry
    out[#out + 1] = reset
  end
  if not allow then return all end

  for i = 1, n do
    local j = a0 + (i - 1) * 7
    local s, add = writes[i], adds[i]
    if s and (add or all) then
      local key, alg, cost, ttl = keys[k0 + i], tonumber(args[j + 1]), args[j + 6], ms(out[o + 4 * i])
      if add then cost = str(add) end
      if alg == FIXED_WINDOW then
        windows_add(key, s[1], s[2], s[3], FIXED_WINDOW_SPAN, cost, ttl)
      elseif alg == SLIDING_LOG then
        local n = tonumber(cost)
        log_append(key, tonumber(args[j + 2]), s[1], s[2], s[3], s[4], n, s[6] and log_crosses(s[1], n, tonumber(args[j + 3])), 0)
        if s[5] then redis.call('ZREM', key, unpack(s[5])) end
      elseif alg == SLIDING_WINDOW then
        windows_add(key, s[1], s[2], s[3], SLIDING_WINDOW_SPAN, cost, ttl)
      else
        local r = recs[i] or {}
        redis.call('SET', key, token_bucket_value(s, r[1], r[2], r[3], now), 'PX', ttl)
      end
    end
  end
  if admit then
    for i = 1, n do
      local r = recs[i]
      if all and r and args[a0 + (i - 1) * 7 + 1] == '4' then
        out[#out + 1] = r[1]
        out[#out + 1] = r[3]
      else
        out[#out + 1] = 0
        out[#out + 1] = 0
      end
      out[#out + 1] = all and tonumber(redis.call('GET', keys[k0 + i] .. ':reset') or '0') or 0
    end
  end
  return all
end
