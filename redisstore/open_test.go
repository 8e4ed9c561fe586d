package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/redisstore"
)

// TestOpenDeployments connects through one URL to each kind of deployment
// and decides on it.
func TestOpenDeployments(t *testing.T) {
	t.Parallel()
	tlsSrv := redistest.StartTLS(t)
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	cluster := redistest.SharedCluster(t).Addrs()
	cases := []struct {
		name, url string
		sharded   bool
	}{
		{"standalone", "redis://" + redistest.Shared(t).Addr() + "/2", false},
		{"cluster", "redis://" + cluster[0] + "?addr=" + cluster[1], true},
		{"sentinel", "redis://" + sentinel.Addr() + "?master_set=mymaster", false},
		{"tls with CA", "rediss://" + tlsSrv.TLSAddr + "?ca_file=" + tlsSrv.CAFile, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s, err := redisstore.Open(ctx, c.url, redisstore.WithPrefix(prefix(t)))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Two identifiers: on Cluster they live in different slots.
			reqs := []redlimit.Request{
				{Key: "a", Limit: redlimit.PerMinute(2).SlidingLog(), Cost: 1},
				{Key: "b", Limit: redlimit.PerMinute(1).FixedWindow(), Cost: 1},
			}
			for i, want := range []bool{true, false} {
				d, err := s.AllowAll(ctx, reqs)
				if err != nil || d.Allowed != want {
					t.Fatalf("call %d: %+v, %v; want allowed %v", i, d, err, want)
				}
			}
			// "a" has one of its two left, unless the denied call took it:
			// a request of cost 1 must still pass, with nothing after it.
			if r, err := s.Peek(ctx, "a", reqs[0].Limit, 1); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Errorf("the denied call consumed: Peek of \"a\" %+v, %v; want allowed with 0 remaining", r, err)
			}
		})
	}
	// The sentinel named the master: the keys are there.
	if out, err := master.Do("DBSIZE"); err != nil || out == "0" {
		t.Errorf("master DBSIZE after deciding through the sentinel: %q, %v", out, err)
	}
	// TLS without the CA is refused, and says why.
	_, err := redisstore.Open(context.Background(), "rediss://"+tlsSrv.TLSAddr+"?dial_timeout=2s")
	if !errors.Is(err, redisstore.ErrConnect) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("TLS without the CA: %v", err)
	}
}
