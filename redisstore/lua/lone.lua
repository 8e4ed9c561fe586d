-- A lone entry (a batch of one, the most common call) takes a path of its
-- own. It makes only the functions it calls: a script makes its functions
-- anew at each call. After this file, script.go joins each algorithm's
-- files then lone_decide.lua, run when lone_alg is that algorithm. For the
-- other kinds, it joins their files then lone_other.lua, run when
-- lone_kind is one of them. lone_alg is the algorithm, as text, of a lone
-- decision of one limit (AllowN, Peek). lone_kind is the kind of a lone
-- entry of another kind. Both are nil for any other batch, which
-- batch.lua decides.
local lone_alg, lone_kind
do
  local e = ARGV[1]
  if #e == 3 and ARGV[5] == '' then
    local kd = string.byte(e, 1)
    if (kd == ALLOW or kd == PEEK) and ARGV[4] == '1' and string.byte(e, 3) == 1 then
      lone_alg = ARGV[6]
    elseif kd ~= ALLOW and kd ~= PEEK and ARGV[4] == '0' then
      lone_kind = kd
    end
  end
end
