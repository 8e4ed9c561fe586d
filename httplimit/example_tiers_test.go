package httplimit_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/httplimit"
	"github.com/redlimit/redlimit/memory"
)

// Tiers: each tenant's plan chooses its limit, and each request's tokens
// its cost. The chat route has a rule of its own besides. An unknown plan
// or a bad cost gets 400, for that request alone.
func ExampleRule_tiers() {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	store, err := memory.New(memory.WithClock(func() time.Time { return t0 }))
	if err != nil {
		panic(err)
	}
	defer store.Close()

	plans := map[string]redlimit.Limit{
		"free": redlimit.PerMinute(100).FixedWindow(),
		"pro":  redlimit.PerMinute(10_000).FixedWindow(),
	}
	tenantPlan := map[string]string{"alice": "free", "bob": "pro", "carol": "gold"}
	planLimit := func(r *http.Request) (redlimit.Limit, error) {
		id, _ := httplimit.UserFrom(r.Context())
		l, ok := plans[tenantPlan[id]]
		if !ok {
			return redlimit.Limit{}, fmt.Errorf("tenant %q has no known plan", id)
		}
		return l, nil
	}
	tokens := func(r *http.Request) (int64, error) {
		return strconv.ParseInt(r.Header.Get("X-Tokens"), 10, 64)
	}
	limits, err := httplimit.New(store, httplimit.Options{Logger: slog.New(slog.DiscardHandler)},
		httplimit.Rule{Name: "plan", Key: httplimit.User, LimitFunc: planLimit, CostFunc: tokens},
		httplimit.Rule{Name: "chat", Pattern: "POST /v1/chat/{id}", Limit: redlimit.PerMinute(2).FixedWindow(), Key: httplimit.User},
	)
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	h := limits.Handle(mux)

	send := func(tenant, method, path, tokens string) {
		r := httptest.NewRequest(method, path, nil)
		r = r.WithContext(httplimit.WithUser(r.Context(), tenant)) // as authentication would
		r.Header.Set("X-Tokens", tokens)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(strings.TrimSpace(fmt.Sprintln(tenant, method, path, tokens, "→", w.Code,
			w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))))
	}
	send("alice", "GET", "/v1/models", "60")
	send("alice", "GET", "/v1/models", "60")  // 40 left: denied until the window ends
	send("alice", "GET", "/v1/models", "500") // above the free plan: never passes
	send("bob", "GET", "/v1/models", "500")
	send("bob", "POST", "/v1/chat/7", "1")
	send("carol", "GET", "/v1/models", "1") // unknown plan
	send("bob", "GET", "/v1/models", "0")   // a cost below 1
	// Output:
	// alice GET /v1/models 60 → 200 "plan";q=100;w=60 "plan";r=40;t=60
	// alice GET /v1/models 60 → 429 "plan";q=100;w=60 "plan";r=40;t=60
	// alice GET /v1/models 500 → 429 "plan";q=100;w=60 "plan";r=40
	// bob GET /v1/models 500 → 200 "plan";q=10000;w=60 "plan";r=9500;t=60
	// bob POST /v1/chat/7 1 → 200 "plan";q=10000;w=60, "chat";q=2;w=60 "chat";r=1;t=60
	// carol GET /v1/models 1 → 400
	// bob GET /v1/models 0 → 400
}
