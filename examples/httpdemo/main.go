// Command httpdemo is a small JSON API rate limited with redlimit. It
// allows 5 requests a second per client IP. With an API key (the X-API-Key
// header), it also allows 100 a minute per key. [redlimit.Limiter.AllowAll]
// decides them together.
//
//	go run ./examples/httpdemo                          # in-memory store
//	go run ./examples/httpdemo -redis 127.0.0.1:6379    # shared Redis store
//	curl -i -H 'X-API-Key: demo' http://127.0.0.1:8080/hello
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
)

var (
	perIP  = redlimit.PerSecond(5)                // sliding_window
	perKey = redlimit.PerMinute(100).SlidingLog() // exact over the last minute
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	redisAddr := flag.String("redis", os.Getenv("REDLIMIT_REDIS"), "Redis `host:port` to keep limits in (default $REDLIMIT_REDIS; empty: in memory)")
	flag.Parse()
	if err := run(*addr, *redisAddr); err != nil {
		slog.Error("httpdemo", "err", err)
		os.Exit(1)
	}
}

func run(addr, redisAddr string) error {
	lim, closeStore, err := openStore(redisAddr)
	if err != nil {
		return err
	}
	defer closeStore()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: addr, Handler: newHandler(lim), ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	slog.Info("listening", "addr", addr)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	slog.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// openStore returns the memory store, or a Redis store when redisAddr is set,
// and a function that releases it.
func openStore(redisAddr string) (redlimit.Limiter, func(), error) {
	if redisAddr == "" {
		s, err := memory.New()
		if err != nil {
			return nil, nil, err
		}
		slog.Info("store=memory (no -redis given)")
		return s, func() { s.Close() }, nil
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Redis at %s: %w", redisAddr, err)
	}
	s, err := redisstore.New(c)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	slog.Info("store=redis", "addr", redisAddr)
	return s, c.Close, nil
}

// newHandler returns the API, every route rate limited by lim.
func newHandler(lim redlimit.Limiter) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"hello": "world"})
	})
	return rateLimit(lim, mux)
}

func rateLimit(lim redlimit.Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqs := []redlimit.Request{{Key: "ip:" + clientIP(r), Limit: perIP, Cost: 1}}
		if k := r.Header.Get("X-API-Key"); k != "" {
			reqs = append(reqs, redlimit.Request{Key: "key:" + k, Limit: perKey, Cost: 1})
		}
		d, err := lim.AllowAll(r.Context(), reqs)
		if err != nil {
			slog.Error("rate limiter", "err", err)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "rate limiter unavailable"})
			return
		}
		i := d.Tightest()
		tight := d.Results[i]
		w.Header().Set("X-RateLimit-Limit", strconv.FormatInt(tight.Max, 10))
		w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(tight.Remaining, 10))
		if d.Allowed {
			next.ServeHTTP(w, r)
			return
		}
		body := map[string]any{"error": "too many requests", "limit": reqs[i].Limit.String()}
		if ra := d.RetryAfter(); ra != redlimit.Never {
			secs := max(1, int64((ra+time.Second-1)/time.Second)) // rounded up
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			body["retry_after_seconds"] = secs
		}
		writeJSON(w, http.StatusTooManyRequests, body)
	})
}

// clientIP returns the host of the request's remote address.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
