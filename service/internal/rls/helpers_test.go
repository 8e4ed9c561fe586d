package rls

import (
	"context"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redlimittest"
	"github.com/redlimit/redlimit/service/internal/config"
)

// fixture is a Service on a memory store with a settable clock.
type fixture struct {
	t     *testing.T
	clock *redlimittest.Clock
	store *memory.Store
	svc   *Service
	obs   *recorder
}

// newFixture returns a Service on a fresh memory store whose configuration
// holds domains (none: no configuration is set).
func newFixture(t *testing.T, opts Options, domains ...*config.Domain) *fixture {
	t.Helper()
	f := &fixture{t: t, clock: redlimittest.NewClock(redlimittest.T0), obs: &recorder{}}
	s, err := memory.New(memory.WithClock(f.clock.Now), memory.WithSweepInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f.store = s
	if opts.Limiter == nil {
		opts.Limiter = s
	}
	if opts.Observer == nil {
		opts.Observer = f.obs
	}
	if opts.Clock == nil {
		opts.Clock = f.clock.Now
	}
	if f.svc, err = New(opts); err != nil {
		t.Fatal(err)
	}
	if domains != nil {
		f.svc.SetConfig(mustConfig(t, domains...))
	}
	return f
}

func mustConfig(t testing.TB, domains ...*config.Domain) *config.Config {
	t.Helper()
	c, err := config.New(domains...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// do decides req and fails the test on an error.
func (f *fixture) do(req *pb.RateLimitRequest) *pb.RateLimitResponse {
	f.t.Helper()
	resp, err := f.svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		f.t.Fatalf("ShouldRateLimit: %v", err)
	}
	if len(resp.Statuses) != len(req.Descriptors) {
		f.t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(req.Descriptors))
	}
	return resp
}

// sig returns the overall code and every status's code, as "OK" or
// "OVER_LIMIT" letters: "O:OO" is overall OK, two statuses OK.
func sig(resp *pb.RateLimitResponse) string {
	l := func(c pb.RateLimitResponse_Code) string {
		switch c {
		case pb.RateLimitResponse_OK:
			return "O"
		case pb.RateLimitResponse_OVER_LIMIT:
			return "X"
		}
		return "?"
	}
	s := l(resp.OverallCode) + ":"
	for _, st := range resp.Statuses {
		s += l(st.Code)
	}
	return s
}

// remaining returns every status's limit_remaining.
func remaining(resp *pb.RateLimitResponse) []uint32 {
	var r []uint32
	for _, st := range resp.Statuses {
		r = append(r, st.LimitRemaining)
	}
	return r
}

func request(domain string, descs ...*rlpb.RateLimitDescriptor) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// desc returns a descriptor of key, value pairs.
func desc(kv ...string) *rlpb.RateLimitDescriptor {
	d := &rlpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// withHits returns d with its own hits_addend.
func withHits(d *rlpb.RateLimitDescriptor, n uint64) *rlpb.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

// domain returns a domain of ds, whose rules it names as in the domain.
func domain(name string, ds ...*config.Descriptor) *config.Domain {
	d := &config.Domain{Name: name, File: name + ".yaml", Descriptors: ds}
	for _, r := range d.Rules() {
		r.Domain = name
	}
	return d
}

func node(key, value string, r *config.Rule, children ...*config.Descriptor) *config.Descriptor {
	return &config.Descriptor{Key: key, Value: value, Rule: r, Descriptors: children}
}

// rule returns a limited rule; unit names the period as a config file would.
func rule(path, name string, l redlimit.Limit, unit string) *config.Rule {
	return &config.Rule{Path: path, Name: name, Limit: l, Unit: unit}
}

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	requests map[string]int
	descs    map[string]int // "domain rule outcome source"
	keys     map[string]int // "outcome key=value,..."
	backend  int
	errs     int
	sources  map[redlimit.Source]int
}

func (r *recorder) Request(answer string, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.requests == nil {
		r.requests = map[string]int{}
	}
	r.requests[answer]++
}

func (r *recorder) Descriptor(domain, rule string, o Outcome, src redlimit.Source, entries []*rlpb.RateLimitDescriptor_Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.descs == nil {
		r.descs = map[string]int{}
		r.keys = map[string]int{}
	}
	r.descs[domain+" "+rule+" "+o.String()+" "+src.String()]++
	r.keys[o.String()+" "+FormatEntries(entries)]++
}

func (r *recorder) Backend(_ time.Duration, src redlimit.Source, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sources == nil {
		r.sources = map[redlimit.Source]int{}
	}
	r.backend++
	r.sources[src]++
	if err != nil {
		r.errs++
	}
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.descs[key]
}

// countKey returns how many descriptors of entries formatted as key came to
// the outcome.
func (r *recorder) countKey(o Outcome, key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[o.String()+" "+key]
}
