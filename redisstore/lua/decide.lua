-- The path of several limits (AllowAll), Reset and refunds, joined after
-- the prelude, every algorithm's files, debit.lua, refund.lua and
-- several.lua (decide_limits, which decides 'allow' and 'peek').
-- KEYS: one key per limit, every one with the same hash tag on Redis Cluster.
-- ARGV[1]: 'allow', 'admit', 'peek', 'reset', 'refund' or 'giveback'.
-- 'refund' and 'giveback' only: ARGV[4], the time in µs the refunded
-- requests were decided at, below which the time is not taken.
-- Then seven values per key: algorithm (1 fixed_window, 2 sliding_log,
-- 3 sliding_window, 4 token_bucket), window µs, count, burst, emission
-- interval µs, cost; and a seventh: for 'refund', the request's mark: its
-- decision time plus the reset-after its allow replied, an instant that
-- says what the allow wrote (see redisstore/refund.go); otherwise 1 for a
-- debit, 0 for an admission (refunds are of admissions only).
-- 'giveback' only: after the seven values of every key, three per key:
-- for a token bucket, the given and epoch of the refund record its
-- admission left (see refund.lua), then the key's reset generation at the
-- admission (all three from the 'admit' reply).
-- Reply: { now, then per key: allowed (1/0), remaining, retry-after µs
-- (-1 for never), reset-after µs }; { now } for 'reset' and 'refund'.
-- 'allow' counts the admissions only if every limit allows, and the
-- debits whatever the others say (debit.lua). 'admit' is 'allow' for
-- Store.Admit: it gives each token bucket it counts an admission in a
-- refund record (token_bucket.lua), and replies three more values per
-- key after the others: that record's given and epoch, and the key's
-- reset generation (see decide_limits).
local op = ARGV[1]
local admit = op == 'admit'
if admit then op = 'allow' end
local first, per = 3, 7
if op == 'refund' or op == 'giveback' then
  first = 4
  now = math.max(now, tonumber(ARGV[4]))
end
for i = 1, #KEYS do
  local alg = ARGV[first + (i - 1) * per + 1]
  local a = tonumber(alg)
  if a ~= FIXED_WINDOW and a ~= SLIDING_LOG and a ~= SLIDING_WINDOW and a ~= TOKEN_BUCKET then
    return redis.error_reply('ERR redlimit: unknown algorithm ' .. tostring(alg))
  end
end

-- A reset leaves a tombstone beside each key it deletes, holding the key's
-- reset generation: a number each reset makes new, never 0 (no reset), for
-- as long as a refund of a request decided before it could still find a
-- state to take from: the key's TTL, and at least the longest a request's
-- mark lies after its decision (two windows, or a token bucket's
-- tolerance). An admission records the generation it found; a refund
-- gives back only in that generation: the reset gave the request's cost
-- back already. Generations, not times, order resets and admissions, so
-- clocks that differ or go back change nothing. A new generation is the
-- last plus 1, or the reset's time when that is more, so that one made
-- after a tombstone expired does not repeat an older one.
if op == 'reset' then
  for i = 1, #KEYS do
    local j = first + (i - 1) * per
    local span = 2 * tonumber(ARGV[j + 2])
    if tonumber(ARGV[j + 1]) == TOKEN_BUCKET then span = tonumber(ARGV[j + 4]) * tonumber(ARGV[j + 5]) end
    local ttl, left = ms(span), redis.call('PTTL', KEYS[i])
    if left > tonumber(ttl) then ttl = str(left) end
    local tomb = KEYS[i] .. ':reset'
    local gen = math.max(tonumber(redis.call('GET', tomb) or '0') + 1, now)
    redis.call('SET', tomb, str(gen), 'PX', ttl)
    redis.call('DEL', KEYS[i])
  end
  return { now }
end

-- 'refund' (of an allowed group, right after another group denied) takes
-- no heed of resets; 'giveback' (the Store's Refund, whenever the caller
-- calls it) gives nothing back after a reset since the admission: the
-- key's generation is not the one the admission found.
if op == 'refund' or op == 'giveback' then
  for i = 1, #KEYS do
    local j = first + (i - 1) * per
    local key, alg, W, n, mark = KEYS[i], tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 6]), tonumber(ARGV[j + 7])
    local r = first + per * #KEYS + 3 * i
    local reset = false
    if op == 'giveback' then reset = tonumber(redis.call('GET', key .. ':reset') or '0') ~= tonumber(ARGV[r]) end
    if reset or mark <= now then
      -- Reset since the decision, or the request's state has expired.
    elseif alg == FIXED_WINDOW then
      windows_refund(key, W, FIXED_WINDOW_SPAN, n, mark)
    elseif alg == SLIDING_LOG then
      sliding_log_refund(key, W, n, mark, op == 'giveback')
    elseif alg == SLIDING_WINDOW then
      windows_refund(key, W, SLIDING_WINDOW_SPAN, n, mark)
    elseif op == 'refund' then
      token_bucket_refund(key, now, tonumber(ARGV[j + 5]), n, mark)
    else
      token_bucket_giveback(key, now, tonumber(ARGV[j + 5]), n, mark, tonumber(ARGV[r - 2]), tonumber(ARGV[r - 1]))
    end
  end
  return { now }
end

local out = { now }
local fine, e = pcall(decide_limits, op == 'allow', KEYS, 0, #KEYS, ARGV, first, out, admit)
if not fine then return key_error(e) end
return out
