package backoff

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// Transport is an [http.RoundTripper] that waits and retries, as Policy
// allows, when a server answers 429 (Too Many Requests) or 503 (Service
// Unavailable) with a Retry-After header.
//
// Only requests that can safely be sent again are retried. Those are the
// requests of an idempotent method (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE), or with an Idempotency-Key or X-Idempotency-Key header. With
// RetryAnyMethod, any other is too. A request with a body is retried only
// if Request.GetBody can read the body again. [http.NewRequest] sets it
// for in-memory bodies. A body that has been consumed is never sent again.
// A 429 or 503 without a usable Retry-After is returned as it is.
//
// With Pace, the transport also keeps to the server's pace before being
// refused. A response's RateLimit field
// (draft-ietf-httpapi-ratelimit-headers) may say a quota has nothing left
// (r=0) for t more seconds. Or a Retry-After may ask to wait. The next
// requests to that host then wait that long before they are sent. A pacing
// wait longer than MaxWait, or than the request's context allows, is
// skipped. The request is then sent, and the server decides.
//
// A Transport is safe for concurrent use. It must not be copied after first
// use.
type Transport struct {
	// Base sends the requests; nil means [http.DefaultTransport].
	Base http.RoundTripper
	// Policy bounds the attempts and waits.
	Policy Policy
	// RetryAnyMethod retries requests of any method, not only idempotent
	// ones, as long as their body can be replayed.
	RetryAnyMethod bool
	// Pace makes requests to a host wait while its last response said the
	// quota is used up.
	Pace bool
	// Limiter and Limit, if Limiter is not nil, pace every request
	// (retries too) to Limit per URL host before it is sent. It waits its
	// turn with [redlimit.Wait], up to Policy's MaxWait and the request's
	// deadline. The key is "backoff:" and the host. Clients sharing a
	// store and Limit share the pace. A request whose turn is further off
	// is not sent: RoundTrip returns an error wrapping [ErrPaced].
	Limiter redlimit.Limiter
	Limit   redlimit.Limit

	mu        sync.Mutex
	notBefore map[string]time.Time // by URL host, while Pace is set
}

// RoundTrip implements [http.RoundTripper].
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx := req.Context()
	retryable := t.retryable(req)
	for attempts := 1; ; attempts++ {
		if t.Pace {
			t.pace(req)
		}
		if err := t.turn(req); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		resp, err := base.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if t.Pace {
			t.observe(req.URL.Host, resp)
		}
		if !retryable || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
			return resp, nil
		}
		d, ok := RetryAfter(resp)
		if !ok || attempts >= t.Policy.maxAttempts() {
			return resp, nil
		}
		wait, ok := t.Policy.Delay(d)
		if !ok || !fits(ctx, wait) {
			return resp, nil
		}
		next, err := rewind(req)
		if err != nil {
			return resp, nil
		}
		drain(resp.Body)
		if !sleep(ctx, wait) {
			if next.Body != nil {
				next.Body.Close()
			}
			return nil, ctx.Err()
		}
		req = next
	}
}

// retryable reports whether req may be sent again.
func (t *Transport) retryable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	if _, ok := req.Header["X-Idempotency-Key"]; ok {
		return true
	}
	return t.RetryAnyMethod
}

// rewind returns a copy of req to send again, with a fresh body.
func rewind(req *http.Request) (*http.Request, error) {
	next := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return next, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	next.Body = body
	return next, nil
}

// drain reads a little of body, so that the connection can be reused, and
// closes it.
func drain(body io.ReadCloser) {
	io.CopyN(io.Discard, body, 4<<10)
	body.Close()
}

// turn waits req's turn under Limit, when Limiter is set.
func (t *Transport) turn(req *http.Request) error {
	if t.Limiter == nil {
		return nil
	}
	// A turn is never further off than redlimit.MaxWait.
	wait := min(t.Policy.maxWait(), redlimit.MaxWait)
	res, err := redlimit.Wait(req.Context(), t.Limiter, "backoff:"+req.URL.Host, t.Limit, 1, wait)
	if err != nil {
		return fmt.Errorf("backoff: pacing %s: %w", req.URL.Host, err)
	}
	if !res.Allowed {
		return fmt.Errorf("%w: %s: retry after %s", ErrPaced, req.URL.Host, res.RetryAfter)
	}
	return nil
}

// ErrPaced reports a request not sent: its turn under Transport.Limit is
// further off than it may wait.
var ErrPaced = errors.New("backoff: the request's turn is further off than it may wait")

// pace waits until the host of req may be sent to again, unless the wait is
// longer than MaxWait or the request's context allows.
func (t *Transport) pace(req *http.Request) {
	t.mu.Lock()
	until := t.notBefore[req.URL.Host]
	t.mu.Unlock()
	d := time.Until(until)
	if d <= 0 || d > t.Policy.maxWait() || !fits(req.Context(), d) {
		return
	}
	sleep(req.Context(), d)
}

// observe records from resp how long requests to host should wait.
func (t *Transport) observe(host string, resp *http.Response) {
	var d time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		ra, ok := RetryAfter(resp)
		if ok { // Retry-After takes precedence over RateLimit.
			d = ra
		}
	}
	if d == 0 {
		d = exhausted(resp.Header)
	}
	if d <= 0 {
		return
	}
	until := time.Now().Add(d)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.notBefore == nil {
		t.notBefore = make(map[string]time.Time)
	}
	if until.After(t.notBefore[host]) {
		t.notBefore[host] = until
	}
	for h, u := range t.notBefore { // forget hosts that may be sent to again
		if time.Until(u) <= 0 {
			delete(t.notBefore, h)
		}
	}
}

// exhausted returns how long the RateLimit field of h says its used-up
// quotas stay so: the longest t among the items with r=0. A malformed field
// is ignored, as the draft requires.
func exhausted(h http.Header) time.Duration {
	limits, err := ratelimitfield.ParseRateLimit(h.Values(ratelimitfield.HeaderRateLimit))
	if err != nil {
		return 0
	}
	var d time.Duration
	for _, l := range limits {
		if l.Remaining == 0 && l.Reset > d {
			d = l.Reset
		}
	}
	return d
}

// RetryAfter returns the wait the Retry-After header of resp asks for, and
// whether it has a valid one. The header holds delta-seconds or an
// HTTP-date. A date is taken relative to the response's Date header, or
// the local clock without one. So clock skew between client and server
// does not matter. A date in the past asks for no wait.
func RetryAfter(resp *http.Response) (time.Duration, bool) {
	v := strings.TrimSpace(resp.Header.Get(ratelimitfield.HeaderRetryAfter))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n > math.MaxInt64/uint64(time.Second) {
			return time.Duration(math.MaxInt64), true
		}
		return time.Duration(n) * time.Second, true
	} else if v[0] >= '0' && v[0] <= '9' && strings.Trim(v, "0123456789") == "" {
		return time.Duration(math.MaxInt64), true // too many digits: forever
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now := time.Now()
	if date, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
		now = date
	}
	return max(0, at.Sub(now)), true
}
