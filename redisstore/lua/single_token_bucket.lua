-- token_bucket for one limit: GET, token_bucket_check and, when allowed,
-- SET, which keeps the key's refund record, if it has one.
local function token_bucket_one(key, allow, W, L, n, cost)
  local tat, given, last, epoch = token_bucket_read(redis.call('GET', key))
  local ok, rem, retry, reset, nxt = token_bucket_check(now, W, L, n, tat)
  if ok and allow then
    redis.call('SET', key, token_bucket_value(nxt, given, last, epoch, now), 'PX', ms(reset))
  end
  return ok, rem, retry, reset
end
