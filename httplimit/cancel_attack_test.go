package httplimit_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
)

// TestCanceledRequestNotServedUnlimited: a request whose context ends
// before the limiter decides (its client went away) must not reach the
// handler without limits, fail open or not. Otherwise a client spends a
// spent limit's worth of work by closing each connection while the store
// decides: the handler's side effects happen, uncounted. grpclimit refuses
// such a call already.
func TestCanceledRequestNotServedUnlimited(t *testing.T) {
	s, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var served atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) })
	m := mustNew(t, s, httplimit.Options{Logger: slog.New(slog.DiscardHandler)},
		httplimit.Rule{Name: "all", Limit: redlimit.PerHour(1), Key: httplimit.Static("k")})
	mh := m.Handle(h)

	mh.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil))
	if served.Load() != 1 {
		t.Fatal("the first request was not served")
	}
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		mh.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", nil).WithContext(ctx))
	}
	if n := served.Load(); n != 1 {
		t.Errorf("a limit of 1 served %d requests: those whose client went away were served unlimited", n)
	}

	// Over a real connection: the store decides slowly, and the client
	// gives up meanwhile.
	served.Store(0)
	done := make(chan struct{}, 1)
	m2 := mustNew(t, slowLimiter{s}, httplimit.Options{Logger: slog.New(slog.DiscardHandler)},
		httplimit.Rule{Name: "slow", Limit: redlimit.PerHour(1), Key: httplimit.Static("k2")})
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { done <- struct{}{} }()
		m2.Handle(h).ServeHTTP(w, r)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not finish the request")
	}
	if n := served.Load(); n != 0 {
		t.Errorf("a request whose client went away while the limiter decided reached the handler (%d)", n)
	}
}

// slowLimiter decides only once the caller's context ends, as a store call
// in flight when the client goes away.
type slowLimiter struct{ redlimit.Limiter }

func (l slowLimiter) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	<-ctx.Done()
	return l.Limiter.AllowAll(ctx, reqs)
}
