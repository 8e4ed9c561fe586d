-- The window algorithms' hash (memory/algorithms.go): one hash per limit.
-- A field named by a window index holds the count of a live window. The
-- index is the time in µs divided by the period, rounded down. The live
-- windows are the key's latest, and for the sliding window the one before
-- it if it has a count. A request at an instant before the latest window
-- (a clock that went back) is counted in the latest window. A request may
-- make a new latest window. The live windows it retires are then kept as
-- fields "p<index>", until the next new window. A refund that empties the
-- latest window deletes it and brings them back. So the key is as if the
-- request never came. A hash holds at most two fields (fixed window) or
-- four (sliding window). A live window never holds 0.

-- windows_read returns the key's latest window index (nil for none), its
-- count, the count of the window before it, and the hash as HGETALL gave
-- it. Each field is parsed once. A "p" field is not a window's, and is
-- skipped by its first byte. The window before the latest, if live, is
-- the second latest.
local function windows_read(key)
  local h = redis.call('HGETALL', key)
  local lw, lc, sw, sc = nil, nil, nil, nil
  for i = 1, #h, 2 do
    local f = h[i]
    if string.byte(f) ~= 112 then -- 'p'
      local w = f + 0
      if lw == nil or w > lw then
        sw, sc, lw, lc = lw, lc, w, h[i + 1]
      elseif sw == nil or w > sw then
        sw, sc = w, h[i + 1]
      end
    end
  end
  if lw == nil then return nil, 0, 0, h end
  local pc = 0
  if sw == lw - 1 then pc = sc + 0 end
  return lw, lc + 0, pc, h
end

-- windows_retire runs when window w becomes the key's latest. h is as
-- windows_read gave it before. The live windows before keep become
-- "p<index>" fields. Those of the previous retirement are deleted.
local function windows_retire(key, h, keep)
  local gone, kept = {}, { 'HSET', key }
  for i = 1, #h, 2 do
    local w = tonumber(h[i])
    if w == nil then
      gone[#gone + 1] = h[i]
    elseif w < keep then
      gone[#gone + 1] = h[i]
      kept[#kept + 1] = 'p' .. h[i]
      kept[#kept + 1] = h[i + 1]
    end
  end
  if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
  if #kept > 2 then redis.call(unpack(kept)) end
end
