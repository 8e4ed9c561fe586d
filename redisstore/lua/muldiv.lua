-- muldiv returns floor(a * b / c) and the remainder, exactly, for whole
-- a, b >= 0 and c > 0 whose quotient is below 2^53 (memory/algorithms.go's
-- mulDiv). The sliding window weighs a count of up to 2^40 by a time of up
-- to 2^48 µs: the product can pass 2^53, where a Lua number rounds.
local muldiv
do
  local TWO52 = 4503599627370496
  local SPLIT = 134217729 -- 2^27 + 1, Veltkamp's splitter for 53-bit numbers

  -- prod_err returns a * b - p exactly, where p is a * b rounded (Dekker).
  local function prod_err(a, b, p)
    local t = SPLIT * a
    local ah = t - (t - a)
    local al = a - ah
    t = SPLIT * b
    local bh = t - (t - b)
    local bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl
  end

  muldiv = function(a, b, c)
    local p = a * b
    if p < TWO52 then
      -- p is exact, and so is the rounded-down quotient of p + c < 2^53.
      local q = math.floor(p / c)
      return q, p - q * c
    end
    -- q is within 2 of the quotient. The remainder a*b - q*c is computed
    -- exactly from the two rounded products and their errors. p - p2 is
    -- exact: the two are within a factor of 2. q is corrected with it.
    local q = math.floor(p / c)
    local p2 = q * c
    local r = (p - p2) + (prod_err(a, b, p) - prod_err(q, c, p2))
    while r < 0 do q, r = q - 1, r + c end
    while r >= c do q, r = q + 1, r - c end
    return q, r
  end
end
