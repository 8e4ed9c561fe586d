-- Joined after the lone decisions of one limit (lone.lua), which need
-- neither.

-- known holds each algorithm's number as text.
local known = { ['1'] = true, ['2'] = true, ['3'] = true, ['4'] = true }

-- sized returns how many keys an entry of kind kd (not ALLOW or PEEK) of
-- x limits has. It also returns the index in ARGV after its values, which
-- start at j. For an unknown kind or algorithm, it returns nil and an
-- error reply.
local function sized(kd, x, j)
  if kd == ACQUIRE or kd == RENEW or kd == RELEASE then return 1, j + 3 end
  local v0, n, k = j, 7 * x, x
  if kd == REFUND or kd == GIVEBACK then v0 = j + 1 end
  if kd == ONCE then
    x, n, k = 1, 8, 2
  elseif kd == GIVEBACK then
    n = 10 * x
  elseif (kd == QUEUE or kd == UNQUEUE) and x ~= 1 then
    return nil, redis.error_reply('ERR redlimit: a queue entry has one limit')
  elseif kd ~= SEVERAL and kd ~= ADMIT and kd ~= RESET and kd ~= REFUND and kd ~= QUEUE and kd ~= UNQUEUE then
    return nil, redis.error_reply('ERR redlimit: unknown entry kind ' .. tostring(kd))
  end
  for l = 0, x - 1 do
    local a = ARGV[v0 + 7 * l]
    if not known[a] then
      return nil, redis.error_reply('ERR redlimit: unknown algorithm ' .. tostring(a))
    end
  end
  return k, v0 + n
end
