-- token_bucket: GCRA. The key holds the theoretical arrival time (TAT) in
-- µs. Every unit of cost moves it one emission interval (ei) later. A
-- request passes while TAT - now stays within burst * ei. Every quantity
-- is relative to now, as in memory/algorithms.go (checkGCRA). So none
-- passes 2^53.

-- token_bucket_check decides a request of cost n at now on a bucket of
-- burst tokens, one every ei µs, whose TAT is tat (0 for none). It returns
-- allowed, remaining, retry-after and reset-after (µs), then the TAT to
-- write.
local function token_bucket_check(now, ei, burst, n, tat)
  local tau = burst * ei
  local d = tat - now
  if d < 0 then d = 0 end
  if n > burst then
    -- It can never pass, and n * ei could pass 2^53.
    return false, math.max(0, math.floor((tau - d) / ei)), NEVER, d, tat
  end
  -- d passes tau after the clock went back (the TAT never does), up to
  -- 2^53 - now: d + n * ei could pass 2^53, d - tau + n * ei cannot.
  local over = d - tau + n * ei
  if over > 0 then
    return false, math.max(0, math.floor((tau - d) / ei)), over, d, tat
  end
  local due = d + n * ei
  return true, math.floor((tau - due) / ei), 0, due, now + due
end

-- A bucket's key holds its TAT as a number. A bucket that Store.Admit
-- counted an admission in holds 'tat given last epoch' instead. That is
-- the record its refunds need (refund.lua):
--   - given: the µs refunds gave back this epoch;
--   - last: the latest instant an admission or debit was counted at;
--   - epoch: a debit to the debt bound moves it on (several.lua).
-- No other call makes a record. Every call that writes a bucket keeps the
-- one it finds, and moves its last (token_bucket_value).

-- token_bucket_read returns the TAT of a bucket's key from its value v
-- (false: no key, a TAT of 0), then its record, if it has one.
local function token_bucket_read(v)
  if not v then return 0 end
  local tat = tonumber(v)
  if tat then return tat end
  local t, given, last, epoch = string.match(v, '^(%S+) (%S+) (%S+) (%S+)$')
  return tonumber(t), tonumber(given), tonumber(last), tonumber(epoch)
end

-- token_bucket_value returns what a bucket's key holds with TAT tat and
-- the record given, last, epoch (given nil: none). Its last moves to t if
-- later. t is the instant of an admission or debit counted, 0 for none.
local function token_bucket_value(tat, given, last, epoch, t)
  if given == nil then return str(tat) end
  return string.format('%d %d %d %d', tat, given, math.max(last, t), epoch)
end
