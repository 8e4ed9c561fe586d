-- redlimit's decision script, joined by redisstore/script.go: this
-- prelude, the files of the algorithms (with the storage they use,
-- windows.lua or log.lua, and muldiv.lua), then batch.lua, which decides
-- every entry a call sends, with the files its entries need. An
-- algorithm's file holds its arithmetic, following memory/algorithms.go
-- operation for operation: <algorithm>_check, from the state read to the
-- result and the state to write. Every path calls it, and differs only in
-- its Redis reads and writes. At one instant a check is monotone in cost (what it
-- admits, it admits at any smaller cost), and admitting a then b leaves
-- the state, and answers b, as admitting a + b at once does: batch.lua
-- decides a hot key's identical decisions as two requests on that.
--
-- Every function is made anew at each call of a script (a closure), which
-- costs Redis CPU on every decision: a script joins only the functions it
-- calls, and they pass plain values with multiple returns rather than
-- tables. redis.call gets strings where the script has them (constants,
-- ARGV, ms): Redis formats a number argument as text, which costs more
-- than a function call. Times are integer microseconds.
-- ARGV[2]: the time in µs, or '' for the server's clock (TIME).
-- ARGV[3]: µs added to every TTL.
if redis.replicate_commands then redis.replicate_commands() end

local NEVER = -1
local FIXED_WINDOW, SLIDING_LOG, SLIDING_WINDOW, TOKEN_BUCKET = 1, 2, 3, 4
-- The entry kinds of a batch (batch.lua, redisstore/wire.go).
local ALLOW, PEEK, SEVERAL, ADMIT, RESET, REFUND, GIVEBACK, ONCE = 97, 112, 115, 109, 114, 102, 103, 111 -- a p s m r f g o
local QUEUE, UNQUEUE = 113, 117 -- q u (queue.lua)
local ACQUIRE, RENEW, RELEASE = 99, 101, 120 -- c e x: a lease's (lease.lua)

-- Numbers reach the script as text and leave it as text, and Redis's Lua
-- converts with strtod and sprintf, which cost as much as a Redis call
-- of their own: a script converts each value once (x + 0 parses once where
-- tonumber parses twice), and str, which formats an integer as text,
-- remembers what it made for the rest of the call, since a batch's
-- decisions share their now, periods and TTLs (values made once each, a
-- sliding log's cums, are formatted directly, not to fill the table).
local texts = {}
local function str(x)
  local s = texts[x]
  if s == nil then
    s = string.format('%d', x)
    texts[x] = s
  end
  return s
end

local MARGIN = ARGV[3] + 0

-- ms converts a positive duration in µs to a TTL in whole milliseconds,
-- rounded up, plus the margin (ARGV[3], see redisstore.WithTTLMargin), as
-- text for redis.call.
local function ms(us)
  -- Rounded up with %, which costs less than math.ceil's call.
  local x = us + MARGIN
  local r = x % 1000
  x = (x - r) / 1000
  if r > 0 then x = x + 1 end
  if x < 1 then x = 1 end
  return texts[x] or str(x)
end

local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = ARGV[2] + 0
end
-- Times are exact from the Unix epoch to 2^52 µs; a clock outside reads as
-- the nearest bound, where time stands still (internal/micros).
if now < 0 then now = 0 elseif now > 4503599627370496 then now = 4503599627370496 end

-- window returns a limit's window from its text (redisstore/wire.go):
-- its µs, or for a calendar limit minus the end of the window that holds
-- now, among three in a row that Go computed around its own clock: 'c',
-- then the middle one's start and end, the first's start and the last's
-- end. With now outside them all, it returns 0: a decision on it fails
-- (fixed_window_of), while a refund or reset, which need no window, go
-- on. The script does no calendar arithmetic; the server's clock picks
-- among Go's windows.
local function window(s)
  if string.byte(s) ~= 99 then return s + 0 end -- 'c'
  local b1, b2 = string.match(s, '^c(%-?%d+),(%-?%d+),')
  if b1 == nil then error('redlimit: bad calendar window ' .. s) end
  b1, b2 = b1 + 0, b2 + 0
  if now >= b1 and now < b2 then return -b2 end
  local b0, b3 = string.match(s, ',(%-?%d+),(%-?%d+)$')
  if now < b1 and now >= b0 + 0 then return -b1 end
  if now >= b2 and now < b3 + 0 then return -b3 end
  return 0
end

-- SKEWED is the error of a decision on a calendar window of 0 (window).
local SKEWED = 'redlimit: the server clock is outside the calendar windows sent'

-- key_failure returns the kind of error e, raised while deciding on one
-- key: 1 for a key of another type (WRONGTYPE), 2 for state the script
-- cannot parse (a Lua error, which names the script's line), 3 for a
-- calendar limit whose windows do not hold the server's clock (SKEWED).
-- Any other error is the server's (out of memory, a replica): it is
-- raised again, and fails the call. Redis refuses those at a script's
-- first write, so nothing is written yet. Redis raises a call's error as
-- its text, or from 7.2 as a table.
local function key_failure(e)
  if e == SKEWED then return 3 end
  local m = e
  if type(e) == 'table' then m = e.err end
  m = tostring(m)
  if string.sub(m, 1, 10) == 'WRONGTYPE ' then return 1 end
  if type(e) == 'string' and string.find(m, '^user_script:%d+: ') then return 2 end
  error(redis.error_reply(m))
end
