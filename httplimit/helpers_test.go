package httplimit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/internal/rulesettest"
	"github.com/redlimit/redlimit/redisstore"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// testStore is a store the tests run against.
type testStore struct {
	name   string
	lim    *peeker
	redis  *redistest.Server // nil for the memory store
	prefix string            // the Redis key prefix of this test
}

// peeker is a Limiter that can also Peek, as both stores can.
type peeker struct {
	redlimit.Limiter
}

// testStores returns a memory store and a Redis store (on the shared server,
// with a key prefix of this test's own), both reading now, or the real clock
// if now is nil. They are closed when t ends.
func testStores(t *testing.T, now func() time.Time) []testStore {
	t.Helper()
	s := rulesettest.NewStores(t, "httplimit", now)
	return []testStore{
		{name: "memory", lim: &peeker{s.Memory}},
		{name: "redis", lim: &peeker{s.Redis}, redis: s.Server, prefix: s.Prefix},
	}
}

// fixedNow returns a clock that stands still at the current second.
var fixedNow = rulesettest.FixedNow

// newLogger returns a logger of every level and its output.
var newLogger = rulesettest.NewLogger

// redisKeys lists the keys of st's prefix holding part.
func (st testStore) redisKeys(t *testing.T, part string) []string {
	t.Helper()
	out, err := st.redis.Do("KEYS", st.prefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range strings.Split(out, "\n") {
		if k != "" && strings.Contains(k, part) {
			keys = append(keys, k)
		}
	}
	return keys
}

// serve starts a real HTTP server whose handler counts what it serves and
// answers 200 "ok".
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func okHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})
}

// get sends a GET to url with the given headers and returns the response with
// its body read.
func get(t *testing.T, url string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func mustNew(t *testing.T, lim redlimit.Limiter, opts httplimit.Options, rules ...httplimit.Rule) *httplimit.Middleware {
	t.Helper()
	m, err := httplimit.New(lim, opts, rules...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func decodeProblem(t *testing.T, resp *http.Response, body []byte) httplimit.Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != httplimit.ContentTypeProblem {
		t.Fatalf("Content-Type %q, want %q", ct, httplimit.ContentTypeProblem)
	}
	var p httplimit.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	return p
}

// peek returns what lim would answer for one more unit under key and limit.
func (p *peeker) peek(t *testing.T, key string, l redlimit.Limit) redlimit.Result {
	t.Helper()
	res, err := p.Peek(context.Background(), key, l, 1)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// redisStoreAt returns a Redis store on the server at addr, with a prefix of
// its own.
func redisStoreAt(t *testing.T, addr string) *redisstore.Store {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("rueidis client: %v", err)
	}
	t.Cleanup(c.Close)
	rs, err := redisstore.New(c, redisstore.WithPrefix(fmt.Sprintf("httplimit-t%x:", rand.Uint64())))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
