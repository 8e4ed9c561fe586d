package backoff_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit/backoff"
)

// flaky is a real server that answers the first n requests with status and
// the given headers, then 200, and records every request body.
type flaky struct {
	mu     sync.Mutex
	n      int
	status int
	header http.Header
	bodies []string
	times  []time.Time
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bodies = append(f.bodies, string(b))
	f.times = append(f.times, time.Now())
	if len(f.bodies) <= f.n {
		for k, vs := range f.header {
			w.Header()[k] = vs
		}
		w.WriteHeader(f.status)
		io.WriteString(w, "later")
		return
	}
	io.WriteString(w, "ok")
}

func (f *flaky) arrivals() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.times...)
}

func (f *flaky) attempts() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

func start(t *testing.T, f *flaky) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// oneShot is a body that cannot be read again.
type oneShot struct{ io.Reader }

func (oneShot) Close() error { return nil }

func TestTransportRetries(t *testing.T) {
	t.Parallel()
	now := hdr("Retry-After", "0")
	tests := []struct {
		name     string
		tr       *backoff.Transport
		status   int
		header   http.Header
		failures int
		req      func(url string) *http.Request
		want     int // attempts the server sees
		status2  int // final status
	}{
		{name: "GET retried", status: 429, header: now, failures: 2, want: 3, status2: 200},
		{name: "503 retried", status: 503, header: now, failures: 1, want: 2, status2: 200},
		{name: "429 without Retry-After", status: 429, failures: 1, want: 1, status2: 429},
		{name: "bad Retry-After", status: 429, header: hdr("Retry-After", "soon"), failures: 1, want: 1, status2: 429},
		{name: "500 is not retried", status: 500, header: now, failures: 1, want: 1, status2: 500},
		{name: "MaxAttempts", tr: &backoff.Transport{Policy: backoff.Policy{MaxAttempts: 2}}, status: 429, header: now, failures: 5, want: 2, status2: 429},
		{name: "default MaxAttempts", status: 429, header: now, failures: 9, want: backoff.DefaultMaxAttempts, status2: 429},
		{name: "PUT with replayable body", status: 429, header: now, failures: 2, want: 3, status2: 200,
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPut, url, strings.NewReader("payload"))
				return r
			}},
		{name: "PUT with a one-shot body", status: 429, header: now, failures: 2, want: 1, status2: 429,
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPut, url, oneShot{strings.NewReader("payload")})
				return r
			}},
		{name: "POST is not retried", status: 429, header: now, failures: 1, want: 1, status2: 429,
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte("payload")))
				return r
			}},
		{name: "POST with RetryAnyMethod", tr: &backoff.Transport{RetryAnyMethod: true}, status: 429, header: now, failures: 1, want: 2, status2: 200,
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte("payload")))
				return r
			}},
		{name: "POST with RetryAnyMethod and a one-shot body", tr: &backoff.Transport{RetryAnyMethod: true}, status: 429, header: now, failures: 1, want: 1, status2: 429,
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPost, url, oneShot{strings.NewReader("payload")})
				return r
			}},
		{name: "POST with Idempotency-Key", status: 429, header: now, failures: 1, want: 2, status2: 200,
			req: func(url string) *http.Request {
				r, _ := http.NewRequest(http.MethodPost, url, strings.NewReader("payload"))
				r.Header.Set("Idempotency-Key", "k1")
				return r
			}},
		{name: "wait above MaxWait gives up at once", tr: &backoff.Transport{Policy: backoff.Policy{MaxWait: time.Second}},
			status: 429, header: hdr("Retry-After", "5"), failures: 1, want: 1, status2: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &flaky{n: tt.failures, status: tt.status, header: tt.header}
			url := start(t, f)
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			if tt.req != nil {
				req = tt.req(url)
			}
			begin := time.Now()
			tr := tt.tr
			if tr == nil {
				tr = &backoff.Transport{}
			}
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status2 {
				t.Errorf("status %d (%q), want %d", resp.StatusCode, body, tt.status2)
			}
			got := f.attempts()
			if len(got) != tt.want {
				t.Errorf("server saw %d attempts, want %d", len(got), tt.want)
			}
			for i, b := range got {
				if b != got[0] {
					t.Errorf("attempt %d sent body %q, the first %q", i+1, b, got[0])
				}
			}
			if d := time.Since(begin); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestTransportWaits(t *testing.T) {
	t.Parallel()
	// An HTTP-date is taken relative to the server's Date, whatever the
	// local clock says: here the server's clock is a year off.
	date := time.Now().Add(-365 * 24 * time.Hour).UTC()
	tests := []struct {
		name   string
		header http.Header
		min    time.Duration
	}{
		{"delta-seconds", hdr("Retry-After", "1"), time.Second},
		{"HTTP-date", hdr("Date", date.Format(http.TimeFormat), "Retry-After", date.Add(time.Second).Format(http.TimeFormat)), time.Second},
		{"HTTP-date in the past", hdr("Date", date.Format(http.TimeFormat), "Retry-After", date.Add(-time.Hour).Format(http.TimeFormat)), 0},
	}
	var wg sync.WaitGroup // the subtests sleep: run them at once
	defer wg.Wait()
	for _, tt := range tests {
		wg.Go(func() {
			t.Run(tt.name, func(t *testing.T) {
				f := &flaky{n: 1, status: 429, header: tt.header}
				url := start(t, f)
				resp, err := (&http.Client{Transport: &backoff.Transport{}}).Get(url)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				times := f.arrivals()
				if resp.StatusCode != 200 || len(times) != 2 {
					t.Fatalf("status %d after %d attempts", resp.StatusCode, len(times))
				}
				gap := times[1].Sub(times[0])
				// 10% jitter at most, and slack for the round trip on a
				// busy machine.
				if gap < tt.min || gap > tt.min+tt.min/10+700*time.Millisecond {
					t.Errorf("retried after %v, want %v plus jitter", gap, tt.min)
				}
			})
		})
	}
}

func TestTransportContext(t *testing.T) {
	t.Parallel()
	t.Run("deadline before the wait ends", func(t *testing.T) {
		t.Parallel()
		// A transport that slept until the deadline would take 10s.
		f := &flaky{n: 1, status: 429, header: hdr("Retry-After", "30")}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, start(t, f), nil)
		begin := time.Now()
		resp, err := (&http.Client{Transport: &backoff.Transport{}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 429 || time.Since(begin) > 5*time.Second {
			t.Errorf("status %d after %v, want 429 at once", resp.StatusCode, time.Since(begin))
		}
	})
	t.Run("canceled while waiting", func(t *testing.T) {
		t.Parallel()
		// Canceled at 200ms: a transport that slept on would take 30s.
		f := &flaky{n: 1, status: 429, header: hdr("Retry-After", "30")}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(200*time.Millisecond, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, start(t, f), nil)
		begin := time.Now()
		_, err := (&http.Client{Transport: &backoff.Transport{}}).Do(req)
		if !errors.Is(err, context.Canceled) || time.Since(begin) > 5*time.Second {
			t.Errorf("error %v after %v, want context.Canceled soon", err, time.Since(begin))
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	date := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{hdr("Retry-After", "120"), 2 * time.Minute, true},
		{hdr("Retry-After", " 0 "), 0, true},
		{hdr("Retry-After", "99999999999999999999999"), 1<<63 - 1, true},
		{hdr("Retry-After", "-1"), 0, false},
		{hdr("Retry-After", "1.5"), 0, false},
		{hdr("Retry-After", ""), 0, false},
		{hdr(), 0, false},
		{hdr("Date", date.Format(http.TimeFormat), "Retry-After", date.Add(90*time.Second).Format(http.TimeFormat)), 90 * time.Second, true},
		{hdr("Date", date.Format(http.TimeFormat), "Retry-After", date.Add(-time.Second).Format(http.TimeFormat)), 0, true},
		{hdr("Date", date.Format(http.TimeFormat), "Retry-After", "Sunday, 01-Mar-26 12:00:30 GMT"), 30 * time.Second, true},
	}
	for _, tt := range tests {
		got, ok := backoff.RetryAfter(&http.Response{Header: tt.header})
		if got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

// TestPacing checks that, with Pace, a response saying the quota is used up
// (RateLimit r=0;t=2) holds the next request back for 2s, while one with
// quota left does not (within 1s: a busy machine's round trips).
func TestPacing(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup // the subtests sleep: run them at once
	defer wg.Wait()
	for _, pace := range []bool{false, true} {
		wg.Go(func() { t.Run(fmt.Sprintf("Pace=%v", pace), func(t *testing.T) { testPacing(t, pace) }) })
	}
}

func testPacing(t *testing.T, pace bool) {
	var mu sync.Mutex
	var times []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		n := len(times)
		mu.Unlock()
		if n == 2 {
			w.Header().Set("RateLimit", `"default";r=0;t=2`)
		} else {
			w.Header().Set("RateLimit", `"default";r=5;t=1`)
		}
	}))
	t.Cleanup(srv.Close)
	c := &http.Client{Transport: &backoff.Transport{Pace: pace}}
	for range 3 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	first, second := times[1].Sub(times[0]), times[2].Sub(times[1])
	mu.Unlock()
	if first > time.Second {
		t.Errorf("Pace %v: the second request waited %v with quota left", pace, first)
	}
	if pace && second < 2*time.Second {
		t.Errorf("Pace: the third request waited %v after r=0;t=2, want 2s", second)
	}
	if !pace && second > time.Second {
		t.Errorf("no Pace: the third request waited %v", second)
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Jitter: 0.5, MaxWait: 10 * time.Second}
	for range 100 {
		d, ok := p.Delay(2 * time.Second)
		if !ok || d < 2*time.Second || d > 3*time.Second {
			t.Fatalf("Delay(2s) = %v, %v; want 2s..3s", d, ok)
		}
	}
	if d, ok := (backoff.Policy{Jitter: -1}).Delay(time.Second); !ok || d != time.Second {
		t.Errorf("no jitter: Delay(1s) = %v, %v", d, ok)
	}
	if _, ok := p.Delay(11 * time.Second); ok {
		t.Error("Delay above MaxWait: ok")
	}
	ctx := context.Background()
	if p.Wait(ctx, backoff.DefaultMaxAttempts, 0) {
		t.Error("Wait after MaxAttempts: true")
	}
	if !p.Wait(ctx, 1, 0) {
		t.Error("Wait(1, 0): false")
	}
	// A wait of 6 to 9s past a deadline 5s away: one that slept until the
	// deadline would take 5s.
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if begin := time.Now(); p.Wait(short, 1, 6*time.Second) || time.Since(begin) > 2*time.Second {
		t.Errorf("Wait past the deadline: did not give up at once (%s)", time.Since(begin))
	}
}

// TestPolicyJitterNeverOverflows: a wait near the largest Duration plus its
// jitter stays the largest Duration, never a negative wait.
func TestPolicyJitterNeverOverflows(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{MaxWait: math.MaxInt64, Jitter: 0.5}
	for _, d := range []time.Duration{9223372036 * time.Second, math.MaxInt64 / 2, math.MaxInt64 - 1, math.MaxInt64} {
		for range 100 {
			got, ok := p.Delay(d)
			if !ok || got < d {
				t.Fatalf("Delay(%d) = %d, %v; want at least %d", d, got, ok, d)
			}
		}
	}
}

// TestHugeRetryAfterIsNotRetriedAtOnce: Retry-After: 9223372036 (292 years)
// with a MaxWait near the largest Duration does not fit a request's
// deadline, so the request is sent once.
func TestHugeRetryAfterIsNotRetriedAtOnce(t *testing.T) {
	t.Parallel()
	f := &flaky{n: 10, status: 429, header: hdr("Retry-After", "9223372036")}
	url := start(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	tr := &backoff.Transport{Policy: backoff.Policy{MaxWait: math.MaxInt64 - 1}}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := len(f.attempts()); n != 1 {
		t.Errorf("server saw %d attempts, want 1", n)
	}
}
