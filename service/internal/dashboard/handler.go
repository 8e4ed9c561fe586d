package dashboard

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of [Options].
const (
	// DefaultJSONPath is where the try form posts: the service's POST /json.
	DefaultJSONPath = "/json"
	// DefaultInterval is how often /api/events pushes a snapshot.
	DefaultInterval = time.Second
	// DefaultMaxStreams bounds the concurrent /api/events streams.
	DefaultMaxStreams = 32
)

// Options configure [Handler]. The zero value of each field is its default.
type Options struct {
	// Rules returns the loaded rules, which GET /api/rules serves as JSON
	// and the page lists. The page shows a list of objects with the fields
	// of config.RuleView (domain, path, unit, requests_per_unit, ...), or an
	// object whose "rules" field is one, as a table; anything else as JSON.
	// It is called for each request, so it can follow reloads. Nil: the
	// page says that no rules are available.
	Rules func() any
	// JSONPath is the path of the service's POST /json endpoint, which the
	// page's try form posts to (default [DefaultJSONPath]).
	JSONPath string
	// Interval is how often /api/events pushes a snapshot (default
	// [DefaultInterval]).
	Interval time.Duration
	// MaxStreams bounds how many /api/events streams may be open at once
	// (default [DefaultMaxStreams]); more are refused with 503, and the
	// page then polls /api/stats.
	MaxStreams int
	// RuleName, if set, returns the name the rule files give the rule
	// labelled rule in domain, or "". Snapshots carry it beside the label,
	// and the page shows it in its place. It is called for each series and
	// top key of every snapshot.
	RuleName func(domain, rule string) string
	// Done, when closed, ends every /api/events stream. http.Server's
	// Shutdown does not cancel the requests it waits for, so a service
	// should close Done when it shuts down (from Server.RegisterOnShutdown,
	// say), or its shutdown waits for open dashboards.
	Done <-chan struct{}
}

//go:embed web
var webFS embed.FS

var (
	staticFS  = mustSub(webFS, "web/static")
	indexTmpl = template.Must(template.ParseFS(webFS, "web/index.html"))
)

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// contentSecurityPolicy lets the page load only its own scripts, styles and
// data, so that nothing a request puts in a key can run as script.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data:; connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'"

// Handler returns the dashboard's HTTP handler, serving:
//
//	GET /             the page
//	GET /static/FILE  its script and style sheet
//	GET /api/stats    a Snapshot as JSON
//	GET /api/events   server-sent events: a Snapshot as JSON every Options.Interval
//	GET /api/rules    the JSON of Options.Rules()
//
// Other paths are 404. The page refers to these with relative URLs, so the
// handler also works under a prefix removed with http.StripPrefix, given a
// trailing slash ("/dashboard/"). The try form posts to Options.JSONPath.
// A nil rec serves an empty dashboard.
func Handler(rec *Recorder, opts Options) http.Handler {
	if rec == nil {
		rec = NewRecorder(RecorderOptions{})
	}
	if opts.JSONPath == "" {
		opts.JSONPath = DefaultJSONPath
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	h := &handler{rec: rec, opts: opts}
	var page bytes.Buffer
	if err := indexTmpl.Execute(&page, struct{ JSONPath string }{opts.JSONPath}); err != nil {
		panic(err) // the template is fixed at build time; tests run it
	}
	h.page = page.Bytes()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.serveIndex)
	mux.HandleFunc("GET /static/{file}", h.serveStatic)
	mux.HandleFunc("GET /api/stats", h.serveStats)
	mux.HandleFunc("GET /api/events", h.serveEvents)
	mux.HandleFunc("GET /api/rules", h.serveRules)
	h.mux = mux
	return h
}

type handler struct {
	rec     *Recorder
	opts    Options
	page    []byte
	mux     *http.ServeMux
	streams atomic.Int64 // open /api/events streams
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	h.mux.ServeHTTP(w, r)
}

func (h *handler) serveIndex(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Security-Policy", contentSecurityPolicy)
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Write(h.page)
}

func (h *handler) serveStatic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	switch {
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	}
	data, err := fs.ReadFile(staticFS, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

func (h *handler) serveStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, h.snapshot())
}

// snapshot returns the recorder's snapshot, with the rules' names.
func (h *handler) snapshot() Snapshot {
	s := h.rec.Snapshot()
	if h.opts.RuleName == nil {
		return s
	}
	for i := range s.Series {
		s.Series[i].Name = h.opts.RuleName(s.Series[i].Domain, s.Series[i].Rule)
	}
	for i := range s.TopKeys {
		s.TopKeys[i].Name = h.opts.RuleName(s.TopKeys[i].Domain, s.TopKeys[i].Rule)
	}
	return s
}

func (h *handler) serveRules(w http.ResponseWriter, _ *http.Request) {
	var rules any
	if h.opts.Rules != nil {
		rules = h.opts.Rules()
	}
	writeJSON(w, rules)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding JSON: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(b, '\n'))
}
