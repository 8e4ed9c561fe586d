package server

import (
	"encoding/json"
	"errors"
	"log"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/rls"
)

// HTTP server timeouts (variables, for the test that sees them applied).
var (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 10 * time.Second
	idleTimeout       = 2 * time.Minute
)

const maxHeaderBytes = 64 << 10

// newHTTP returns the HTTP server:
//
//	POST /json        the RLS in protojson (200 OK, 429 over limit, problem+json errors);
//	                  403 while gRPC requires client certificates and HTTP does not
//	GET  /healthz     200 while the process serves (liveness)
//	GET  /readyz      200 once the configuration is loaded and Redis, if named, answers; 503 otherwise
//	GET  /healthcheck the same as /readyz, the path envoyproxy/ratelimit serves
//	GET  /metrics     Prometheus metrics
//	GET  /rules       the configuration in use as JSON
//	GET  /debug/pprof/ runtime profiles, with Options.Pprof (not cmdline, which
//	                  would show secrets given on the command line)
//	GET  /            the live dashboard, unless Options.NoDashboard, with its
//	                  /static/, /api/stats, /api/events and /api/rules
//
// The routes above the dashboard's take precedence: it gets only the paths
// they do not match. Every route answers only the allowed hosts
// (Options.AllowedHosts: 421 otherwise), and refuses requests that change
// something from a browser page of another origin (403).
func (s *Server) newHTTP() (*http.Server, error) {
	hosts, err := newHostPolicy(s.opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/json", s.jsonHandler())
	mux.HandleFunc("GET /healthz", serveLive)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.HandleFunc("GET /healthcheck", s.serveReady)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry}))
	mux.HandleFunc("GET /rules", s.serveRules)
	if s.opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
			rls.WriteProblem(w, http.StatusNotFound, errCmdline.Error())
		})
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if s.recorder != nil {
		mux.Handle("/", s.dashboardHandler())
	}
	srv := &http.Server{
		Handler:           closeAged(hosts.checkHost(crossOrigin(mux))),
		ConnContext:       connContext,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          log.New(httpErrorLog{s}, "", 0),
	}
	if s.recorder != nil {
		srv.RegisterOnShutdown(s.closeDashboard)
	}
	return srv, nil
}

// errJSONNeedsClientCert is /json's answer while gRPC requires client
// certificates and the HTTP address asks for none.
var errJSONNeedsClientCert = errors.New("gRPC requires client certificates and this HTTP address asks for none: " +
	"POST /json decides nothing here (serve HTTP with --http-tls=mtls, or allow it with --http-json-without-client-cert)")

// jsonHandler returns POST /json: the RLS, unless gRPC requires client
// certificates and the HTTP address does not, when it answers 403 (see
// Options.HTTPJSONWithoutClientCert).
func (s *Server) jsonHandler() http.Handler {
	if s.opts.TLSClientCAFile != "" && s.opts.HTTPTLS != HTTPTLSMutual && !s.opts.HTTPJSONWithoutClientCert {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			rls.WriteProblem(w, http.StatusForbidden, errJSONNeedsClientCert.Error())
		})
	}
	var h http.Handler = s.svc.JSONHandler(int64(s.opts.MaxMessageBytes))
	if s.tracing != nil {
		h = s.tracing.Handler("/json", h)
	}
	return h
}

// newProbeHTTP returns the server of the probe address: GET /healthz,
// /readyz and /healthcheck, as on the HTTP address, and nothing else. It
// checks no Host: it serves nothing a page could use.
func (s *Server) newProbeHTTP() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", serveLive)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.HandleFunc("GET /healthcheck", s.serveReady)
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       readHeaderTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}

// serveLive answers GET /healthz: 200 while the process serves.
func serveLive(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := s.ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("not ready: " + err.Error() + "\n"))
		return
	}
	w.Write([]byte("ready\n"))
}

// rulesView is the body of GET /rules.
type rulesView struct {
	Files   []string       `json:"files"`
	Domains []string       `json:"domains"`
	Rules   []*config.Rule `json:"rules"`
	Shadow  bool           `json:"global_shadow_mode"`
}

// rulesView returns the configuration in use, as GET /rules and the
// dashboard show it.
func (s *Server) rulesView() rulesView {
	cfg := s.svc.Config()
	v := rulesView{Files: cfg.Files, Domains: domainNames(cfg), Rules: cfg.Rules(), Shadow: s.opts.Shadow}
	if v.Files == nil {
		v.Files = []string{}
	}
	if v.Rules == nil {
		v.Rules = []*config.Rule{}
	}
	return v
}

func (s *Server) serveRules(w http.ResponseWriter, _ *http.Request) {
	b, err := json.MarshalIndent(s.rulesView(), "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}
