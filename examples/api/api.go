package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/clientip"
	"github.com/redlimit/redlimit/httplimit"
)

// The limits of the API.
var (
	// perIP: 5 requests a second per client network, for everyone.
	perIP = redlimit.PerSecond(5)
	// perUser: 100 requests a minute per user, exact over the last minute.
	perUser = redlimit.PerMinute(100).SlidingLog()
	// writes: 10 writes a minute per user, or per client network for
	// anonymous clients.
	writes = redlimit.PerMinute(10)
)

// config is what the flags set.
type config struct {
	// trusted lists the reverse proxies whose X-Forwarded-For is believed.
	trusted []netip.Prefix
	// apiKeys maps API keys (the X-API-Key header) to user names.
	apiKeys map[string]string
	// shadowWrites runs the writes limit as a dry run.
	shadowWrites bool
}

// demoKeys are the API keys the example knows.
var demoKeys = map[string]string{"alice-key": "alice", "bob-key": "bob"}

// newHandler returns the API, rate limited by lim.
func newHandler(lim redlimit.Limiter, cfg config) (http.Handler, error) {
	ip, err := httplimit.IPKey(clientip.Resolver{TrustedProxies: cfg.trusted})
	if err != nil {
		return nil, err
	}
	limits, err := httplimit.New(lim, httplimit.Options{},
		httplimit.Rule{Name: "ip", Limit: perIP, Key: ip},
		httplimit.Rule{Name: "user", Limit: perUser, Key: httplimit.User},
		httplimit.Rule{Name: "writes", Limit: writes, Key: writesKey(httplimit.Or(httplimit.User, ip)), Shadow: cfg.shadowWrites},
	)
	if err != nil {
		return nil, err
	}

	s := &store{items: map[int]item{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/items", s.list)
	mux.HandleFunc("GET /v1/items/{id}", s.get)
	mux.HandleFunc("POST /v1/items", s.create)
	mux.HandleFunc("DELETE /v1/items/{id}", s.delete)

	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	// Authentication runs first, so that the limits can key by user.
	root.Handle("/v1/", authenticate(cfg.apiKeys, limits.Handle(mux)))
	return root, nil
}

// writesKey returns key for requests that change something, and no key (so
// the writes rule is skipped) for reads.
func writesKey(key httplimit.KeyFunc) httplimit.KeyFunc {
	return func(r *http.Request) (string, error) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return "", httplimit.ErrNoKey
		}
		return key(r)
	}
}

// authenticate puts the user of a valid X-API-Key in the request's context,
// refuses an unknown key with 401, and lets requests without a key through
// as anonymous.
func authenticate(keys map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := r.Header.Get("X-API-Key")
		if k == "" {
			next.ServeHTTP(w, r)
			return
		}
		user, ok := keys[k]
		if !ok {
			httplimit.WriteProblem(w, httplimit.Problem{
				Type: "about:blank", Title: "Unauthorized", Status: http.StatusUnauthorized,
				Detail: "Unknown API key.",
			})
			return
		}
		next.ServeHTTP(w, r.WithContext(httplimit.WithUser(r.Context(), user)))
	})
}

// item is one thing the API stores.
type item struct {
	ID      int       `json:"id"`
	Name    string    `json:"name"`
	Owner   string    `json:"owner,omitempty"`
	Created time.Time `json:"created"`
}

// store keeps the items in memory.
type store struct {
	mu    sync.Mutex
	next  int
	items map[int]item
}

func (s *store) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	items := make([]item, 0, len(s.items))
	for _, it := range s.items {
		items = append(items, it)
	}
	s.mu.Unlock()
	slices.SortFunc(items, func(a, b item) int { return a.ID - b.ID })
	writeJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *store) get(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	it, ok := s.items[id]
	s.mu.Unlock()
	if err != nil || !ok {
		notFound(w, r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, it)
}

func (s *store) create(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"name"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || in.Name == "" {
		httplimit.WriteProblem(w, httplimit.Problem{
			Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest,
			Detail: `The body must be a JSON object with a non-empty "name".`,
		})
		return
	}
	owner, _ := httplimit.UserFrom(r.Context())
	s.mu.Lock()
	s.next++
	it := item{ID: s.next, Name: in.Name, Owner: owner, Created: time.Now().UTC().Truncate(time.Second)}
	s.items[it.ID] = it
	s.mu.Unlock()
	w.Header().Set("Location", fmt.Sprintf("/v1/items/%d", it.ID))
	writeJSON(w, http.StatusCreated, it)
}

func (s *store) delete(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	_, ok := s.items[id]
	delete(s.items, id)
	s.mu.Unlock()
	if err != nil || !ok {
		notFound(w, r.PathValue("id"))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func notFound(w http.ResponseWriter, id string) {
	httplimit.WriteProblem(w, httplimit.Problem{
		Type: "about:blank", Title: "Not Found", Status: http.StatusNotFound,
		Detail: fmt.Sprintf("No item %q.", id),
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}
