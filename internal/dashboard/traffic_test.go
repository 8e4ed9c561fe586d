package dashboard

import (
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
)

// traffic makes up the decisions of a busy service, for the browser test
// and the screenshot: five rules at different rates, hot keys drawn from
// Zipf distributions, denials answered partly from the deny cache, and a
// made-up history (a login burst, a short Redis outage) for the last
// minute.
type traffic struct {
	rec *Recorder

	mu    sync.Mutex // guards rng and the Zipf generators
	rng   *rand.Rand
	ips   *rand.Zipf
	users *rand.Zipf
}

func newTraffic(rec *Recorder) *traffic {
	rng := rand.New(rand.NewPCG(7, 11))
	return &traffic{
		rec:   rec,
		rng:   rng,
		ips:   rand.NewZipf(rng, 1.3, 1, 499),
		users: rand.NewZipf(rng, 1.2, 1, 9999),
	}
}

// flow is one rule's traffic: decisions per second and the share denied.
type flow struct {
	domain, rule string
	rate, deny   float64
	shadow       bool
	key          func(*traffic) string
}

func ipKey(tr *traffic) string {
	n := tr.ips.Uint64()
	return "203.0." + strconv.FormatUint(113+n/250, 10) + "." + strconv.FormatUint(n%250+1, 10)
}

func userKey(tr *traffic) string { return "user-" + strconv.FormatUint(tr.users.Uint64(), 10) }

func tenantKey(tr *traffic) string {
	return []string{"acme", "globex", "initech", "umbrella"}[tr.rng.IntN(4)]
}

func clientKey(tr *traffic) string { return "client-" + strconv.Itoa(tr.rng.IntN(40)) }

var flows = []flow{
	{domain: "api", rule: "api.remote_address", rate: 120, deny: 0.06, key: ipKey},
	{domain: "api", rule: "api.remote_address.path_/login", rate: 12, deny: 0.3, key: ipKey},
	{domain: "api", rule: "api.user", rate: 60, deny: 0.12, key: userKey},
	{domain: "api", rule: "api.tenant", rate: 25, deny: 0.1, shadow: true, key: tenantKey},
	{domain: "auth", rule: "auth.client_id", rate: 40, deny: 0.03, key: clientKey},
}

// span makes up the decisions of [from, from+d), as of ago seconds before
// now: a login burst 45 to 35 s ago, a Redis outage 24 to 19 s ago.
func (tr *traffic) span(from time.Time, d time.Duration, ago float64) {
	if d <= 0 {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	burst := ago <= 45 && ago > 35
	outage := ago <= 24 && ago > 19
	wave := 1 + 0.25*math.Sin(ago/9) // traffic is never flat
	for _, f := range flows {
		rate, deny := f.rate*wave, f.deny
		if burst && f.rule == "api.remote_address.path_/login" {
			rate, deny = rate*5, 0.75
		}
		// Poisson-ish: the expected count, with the fraction drawn.
		exp := rate * d.Seconds()
		n := int(exp)
		if tr.rng.Float64() < exp-float64(n) {
			n++
		}
		for range n {
			at := from.Add(time.Duration(tr.rng.Int64N(int64(d))))
			e := Event{Domain: f.domain, Rule: f.rule, Key: f.key(tr), Allowed: tr.rng.Float64() >= deny, Shadow: f.shadow}
			switch {
			case outage && f.domain == "auth":
				e.Source = redlimit.FromFailOpen // auth's failure_policy
				e.Allowed = true
			case outage:
				e.Source = redlimit.FromLocal
			case !e.Allowed && !e.Shadow && tr.rng.Float64() < 0.6:
				e.Source = redlimit.FromDenyCache
			default:
				e.Source = redlimit.FromStore
				// Redis on loopback: about 0.3 ms, with a tail.
				e.Latency = time.Duration(300e3 * math.Exp(0.35*tr.rng.NormFloat64()))
				if tr.rng.Float64() < 0.01 {
					e.Latency *= 6
				}
			}
			tr.rec.observeAt(at, e)
		}
	}
	if outage { // backend errors, as BackendError counts them, back then
		for range int(30 * d.Seconds()) {
			at := from.Add(time.Duration(tr.rng.Int64N(int64(d))))
			tr.rec.errPerSecond.add(at.Unix(), 1)
			tr.rec.errTotal.Add(1)
			tr.rec.lastErr.Store(&lastError{msg: "redisstore: eval sliding_window: i/o timeout", at: at})
		}
	}
}

// backfill makes up the last minute before now, as if the Recorder had
// started five minutes ago.
func (tr *traffic) backfill(now time.Time) {
	tr.rec.started = now.Add(-5 * time.Minute)
	for s := WindowSeconds; s >= 1; s-- {
		tr.span(now.Add(-time.Duration(s)*time.Second), time.Second, float64(s))
	}
	tr.rec.SetBreakerState("closed")
}

// run feeds live traffic every tick until stop is closed.
func (tr *traffic) run(stop <-chan struct{}, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	prev := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			tr.span(prev, now.Sub(prev), 0)
			prev = now
		}
	}
}
