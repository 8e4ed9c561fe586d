-- KEYS: one key per limit, every one with the same hash tag on Redis Cluster.
-- ARGV[1]: 'allow', 'peek', 'reset' or 'refund'.
-- ARGV[2]: the time in µs, or '' for the server's clock (TIME).
-- ARGV[3]: µs added to every TTL.
-- Then six values per key: algorithm (1 fixed_window, 2 sliding_log,
-- 3 sliding_window, 4 token_bucket), window µs, count, burst, emission
-- interval µs, cost.
-- Reply: { now, then per key: allowed (1/0), remaining, retry-after µs
-- (-1 for never), reset-after µs }. 'allow' commits only if every limit allows.
if redis.replicate_commands then redis.replicate_commands() end

local op = ARGV[1]
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
end

local algorithms = { fixed_window, sliding_log, sliding_window, token_bucket }
local limits = {}
for i = 1, #KEYS do
  local j = 3 + (i - 1) * 6
  local alg = algorithms[tonumber(ARGV[j + 1])]
  if alg == nil then return redis.error_reply('ERR redlimit: unknown algorithm ' .. tostring(ARGV[j + 1])) end
  limits[i] = {
    alg = alg,
    window = tonumber(ARGV[j + 2]),
    count = tonumber(ARGV[j + 3]),
    burst = tonumber(ARGV[j + 4]),
    ei = tonumber(ARGV[j + 5]),
    cost = tonumber(ARGV[j + 6]),
  }
end

if op == 'reset' or op == 'refund' then
  for i, a in ipairs(limits) do a.alg[op](KEYS[i], now, a) end
  return { now }
end

local results, all = {}, true
for i, a in ipairs(limits) do
  results[i] = a.alg.check(KEYS[i], now, a)
  all = all and results[i].ok == true
end
if op == 'allow' and all then
  for i, a in ipairs(limits) do a.alg.commit(KEYS[i], now, a, results[i]) end
end

local out = { now }
for _, r in ipairs(results) do
  out[#out + 1] = r.ok and 1 or 0
  out[#out + 1] = r.rem
  out[#out + 1] = r.retry
  out[#out + 1] = r.reset
end
return out
