package dashboard

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
)

// Defaults of [RecorderOptions].
const (
	// DefaultTopK is how many counters each top-keys summary keeps.
	DefaultTopK = 100
	// DefaultMaxSeries bounds the (domain, rule) pairs counted apart.
	DefaultMaxSeries = 200
)

// Event is one decision of one limited descriptor, as the service reports
// it to [Recorder.Observe].
type Event struct {
	// Domain is the request's domain.
	Domain string
	// Rule names the rule that decided: its path, such as
	// "api.remote_address".
	Rule string
	// Key is the limited key, such as the descriptor's value. The top
	// limited keys list it.
	Key string
	// Allowed reports whether the rule allowed the descriptor.
	Allowed bool
	// Shadow reports that the rule is in shadow mode. A shadow event that
	// is not Allowed is a shadow denial: the rule would have denied, the
	// request was answered OK.
	Shadow bool
	// Source is the path that decided: the store, the deny cache, the local
	// fallback, fail-open or fail-closed.
	Source redlimit.Source
	// Latency is how long the backend call that decided took; 0 when it
	// was not measured (the deny cache, say), and then it is not recorded.
	// When one call decides several descriptors, give it on one Event
	// only, so that each call counts once; or leave it 0 and give each
	// call's latency to [Recorder.Latency] instead.
	Latency time.Duration
}

// RecorderOptions configure a [Recorder]. The zero value of each field is
// its default.
type RecorderOptions struct {
	// Now is the clock; default time.Now.
	Now func() time.Time
	// BreakerState, if set, is asked for the circuit breaker's state at
	// each snapshot, such as (*resilient.Limiter).BreakerState. Without
	// it, snapshots show the last state given to [Recorder.SetBreakerState].
	BreakerState func() string
	// TopK is how many counters each summary of the top limited keys keeps
	// (default [DefaultTopK]). There are two summaries per shard, and a
	// shard per CPU up to 8.
	TopK int
	// MaxSeries bounds how many (domain, rule) pairs are counted apart
	// (default [DefaultMaxSeries]). Events of further pairs are counted
	// under the domain and rule "(other)".
	MaxSeries int
}

// Recorder collects what the service decides, for the dashboard. It keeps
// decisions per second by domain and rule, and by decision path. It keeps
// backend latency and errors, the circuit breaker's state and the most
// limited keys.
//
// A Recorder is safe for concurrent use. Observe costs a few atomic adds
// on counters sharded by CPU. A denial also takes a short critical section
// on one of several top-keys shards. It never takes a lock shared by every
// decision. Memory is bounded, however many distinct keys pass. It holds
// per-second counters for the last minute of at most MaxSeries rules, and
// a fixed number of top-key counters.
//
// Methods on a nil *Recorder do nothing, so a service without a dashboard
// can keep calling them.
type Recorder struct {
	now          func() time.Time
	breakerState func() string
	started      time.Time
	mask         uint32 // shards - 1

	series  *seriesTable
	sources []sourceShard
	latency []latRing
	top     *topKeys

	errPerSecond ring
	errTotal     atomic.Uint64
	lastErr      atomic.Pointer[lastError]

	breakerMu    sync.Mutex
	breaker      string
	breakerSince time.Time
}

// numSources is the number of decision paths counted: every
// redlimit.Source, and one more for any unknown value.
const numSources = int(redlimit.Undecided) + 2

// sourceShard is one shard of the counts by decision path.
type sourceShard struct {
	perSecond [numSources]ring
	total     [numSources]atomic.Uint64
}

type lastError struct {
	msg string
	at  time.Time
}

// maxErrorLen is the most bytes of a backend error's message kept.
const maxErrorLen = 300

// NewRecorder returns an empty Recorder.
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.TopK <= 0 {
		opts.TopK = DefaultTopK
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = DefaultMaxSeries
	}
	shards := 1
	for shards < runtime.GOMAXPROCS(0) && shards < 8 {
		shards *= 2
	}
	now := opts.Now()
	return &Recorder{
		now:          opts.Now,
		breakerState: opts.BreakerState,
		started:      now,
		mask:         uint32(shards - 1),
		series:       newSeriesTable(opts.MaxSeries, shards),
		sources:      make([]sourceShard, shards),
		latency:      make([]latRing, shards),
		top:          newTopKeys(opts.TopK, shards, int64(ringLen*time.Second), now.UnixNano()),
	}
}

// Observe records one decision. Call it once per limited descriptor.
func (r *Recorder) Observe(e Event) {
	if r == nil {
		return
	}
	r.observeAt(r.now(), e)
}

func (r *Recorder) observeAt(now time.Time, e Event) {
	sec := now.Unix()
	shard := int(rand.Uint32() & r.mask)

	out := outAllowed
	if !e.Allowed {
		out = outDenied
		if e.Shadow {
			out = outShadowDenied
		}
	}
	s := r.series.get(e.Domain, e.Rule)
	sh := &s.shards[shard]
	sh.perSecond[out].add(sec, 1)
	sh.total[out].Add(1)

	src := int(e.Source)
	if src >= numSources-1 {
		src = numSources - 1
	}
	ss := &r.sources[shard]
	ss.perSecond[src].add(sec, 1)
	ss.total[src].Add(1)

	if e.Latency > 0 {
		r.latency[shard].add(sec, e.Latency)
	}
	if out != outAllowed {
		r.top.add(shard, item{s: s, key: clip(e.Key)}, now.UnixNano())
	}
}

// Latency records how long one call to the backend took, for the latency
// percentiles. Call it once per call, for services that time calls rather
// than decisions, and then leave Event.Latency 0. A d <= 0 is ignored.
func (r *Recorder) Latency(d time.Duration) {
	if r == nil || d <= 0 {
		return
	}
	r.latency[rand.Uint32()&r.mask].add(r.now().Unix(), d)
}

// BackendError records that a call to the backend (Redis) failed. The
// dashboard shows errors per second and the last message. A nil err is
// ignored.
func (r *Recorder) BackendError(err error) {
	if r == nil || err == nil {
		return
	}
	now := r.now()
	r.errPerSecond.add(now.Unix(), 1)
	r.errTotal.Add(1)
	// Keep the message, replacing it at most once a second, so that an
	// outage does not allocate per call.
	if last := r.lastErr.Load(); last != nil && last.at.Unix() == now.Unix() {
		return
	}
	msg := err.Error()
	if len(msg) > maxErrorLen {
		msg = clip(msg[:maxErrorLen])
	}
	r.lastErr.Store(&lastError{msg: msg, at: now})
}

// SetBreakerState records the circuit breaker's state, such as "closed",
// "open" or "half-open". It is for services that learn of changes; with
// RecorderOptions.BreakerState set, snapshots ask that instead.
func (r *Recorder) SetBreakerState(state string) {
	if r == nil {
		return
	}
	r.setBreaker(state, r.now())
}

func (r *Recorder) setBreaker(state string, now time.Time) {
	r.breakerMu.Lock()
	defer r.breakerMu.Unlock()
	if state != r.breaker {
		r.breaker, r.breakerSince = state, now
	}
}
