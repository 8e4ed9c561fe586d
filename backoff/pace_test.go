package backoff_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/backoff"
	"github.com/redlimit/redlimit/memory"
)

// TestTransportLimit: 4 clients sharing one limit of 20 a second (one
// each 50ms) send 12 requests at once: the server gets them in turn, the
// last no sooner than 11 intervals after the first could go; a client
// that may not wait that long sends nothing and gets ErrPaced.
func TestTransportLimit(t *testing.T) {
	var mu sync.Mutex
	var got []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, time.Now())
		mu.Unlock()
	}))
	defer srv.Close()
	store, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	limit := redlimit.Per(20, time.Second).TokenBucket(1)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		c := &http.Client{Transport: &backoff.Transport{Limiter: store, Limit: limit, Policy: backoff.Policy{MaxWait: 5 * time.Second}}}
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}()
		}
	}
	wg.Wait()
	mu.Lock()
	slices.SortFunc(got, func(a, b time.Time) int { return a.Compare(b) })
	if len(got) != 12 {
		t.Fatalf("server got %d requests, want 12", len(got))
	}
	if span := got[11].Sub(start); span < 11*50*time.Millisecond-time.Millisecond {
		t.Errorf("12 requests within %s: faster than the limit", span)
	}
	mu.Unlock()
	impatient := &http.Client{Transport: &backoff.Transport{Limiter: store, Limit: limit, Policy: backoff.Policy{MaxWait: time.Millisecond}}}
	// 20 places taken: the next turn is about a second off.
	host := strings.TrimPrefix(srv.URL, "http://")
	for range 20 {
		if _, err := store.Queue(context.Background(), "backoff:"+host, limit, 1, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := impatient.Get(srv.URL); !errors.Is(err, backoff.ErrPaced) {
		t.Errorf("impatient client: %v, want ErrPaced", err)
	}
}

// TestTransportLimitLongMaxWait: a Policy whose MaxWait is longer than
// redlimit.MaxWait ("wait as long as it takes") still paces requests: the
// turn's wait is capped, not refused as invalid.
func TestTransportLimitLongMaxWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	store, err := memory.New()
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, l := range []redlimit.Limit{redlimit.Per(20, time.Second).TokenBucket(1), redlimit.Per(20, time.Second)} {
		c := &http.Client{Transport: &backoff.Transport{Limiter: store, Limit: l, Policy: backoff.Policy{MaxWait: 1<<63 - 1}}}
		for range 2 {
			resp, err := c.Get(srv.URL)
			if err != nil {
				t.Fatalf("%v: %v", l, err)
			}
			resp.Body.Close()
		}
	}
}
