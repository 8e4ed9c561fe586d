package redisstore_test

import (
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// TestMulDivExact runs muldiv.lua on Redis over products up to 2^98, near
// whole multiples of the divisor and at random, and compares each quotient
// and remainder with exact integer arithmetic.
func TestMulDivExact(t *testing.T) {
	t.Parallel()
	type in struct{ a, b, c int64 }
	var ins []in
	add := func(a, b, c int64) {
		if a < 0 || b < 0 || c < 1 || a > 1<<53 || b > 1<<53 || c > 1<<53 {
			return
		}
		q := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
		if q.Div(q, big.NewInt(c)).Cmp(big.NewInt(1<<53)) >= 0 {
			return
		}
		ins = append(ins, in{a, b, c})
	}
	// The sliding window's products: a count of up to 2^41 by a time of up
	// to 2^49 µs, over the window, a count, or the time.
	for _, c := range []int64{1, 2, 3, 999, 1000, 1 << 20, 1<<40 - 1, 1 << 40, 1<<41 + 1, 316224000000000, 1<<49 - 1, 1 << 49} {
		for _, d := range []int64{-2, -1, 0, 1, 2} {
			add(c+d, c-1, c)
			add(c-1, c+d, c)
			add(c+d, c+d, c)
			add(1<<41+d, c-1, c)
			add(1<<40+d, 316224000000000+d, c)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		c := 1 + rng.Int64N(1<<49)
		b := rng.Int64N(c + 1)
		a := rng.Int64N(1<<41 + 1)
		if rng.IntN(2) == 0 {
			b, c = c, 1+rng.Int64N(1<<41) // the retry's k*W/prev
		}
		add(a, b, c)
	}
	script := redisstore.LuaFile("muldiv") + `
local out = {}
for i = 1, #ARGV, 3 do
  local q, r = muldiv(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))
  out[#out + 1] = string.format('%d %d', q, r)
end
return table.concat(out, ',')`
	srv := redistest.Shared(t)
	for start := 0; start < len(ins); start += 500 {
		batch := ins[start:min(start+500, len(ins))]
		args := []string{"EVAL", script, "0"}
		for _, x := range batch {
			args = append(args, strconv.FormatInt(x.a, 10), strconv.FormatInt(x.b, 10), strconv.FormatInt(x.c, 10))
		}
		out, err := srv.Do(args...)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Split(out, ",")
		if len(got) != len(batch) {
			t.Fatalf("%d answers for %d inputs", len(got), len(batch))
		}
		for i, x := range batch {
			q, r := new(big.Int).QuoRem(new(big.Int).Mul(big.NewInt(x.a), big.NewInt(x.b)), big.NewInt(x.c), new(big.Int))
			if want := q.String() + " " + r.String(); got[i] != want {
				t.Errorf("muldiv(%d, %d, %d) = %s, want %s", x.a, x.b, x.c, got[i], want)
			}
		}
	}
	t.Logf("%d products checked", len(ins))
}
