-- A batch of one decision of one limit (AllowN or Peek alone, the most
-- common call) takes a path of its own, which makes only its algorithm's
-- functions (a script makes its functions anew at each call): the files
-- of lone_alg, its algorithm as text, then lone_decide.lua (script.go
-- joins them). lone_alg is nil for any other batch, which batch.lua
-- decides.
local lone_alg
do
  local e = ARGV[1]
  if #e == 3 and string.byte(e, 3) == 1 and ARGV[5] == '' and ARGV[4] == '1' then
    local kd = string.byte(e, 1)
    if kd == ALLOW or kd == PEEK then lone_alg = ARGV[6] end
  end
end
