// Command api is a small JSON API rate limited with httplimit. Its limits:
//   - 5 requests a second per client IP, for everyone;
//   - 100 a minute per user, for clients with an API key (the X-API-Key
//     header);
//   - 10 writes a minute per user or IP.
//
// One call to the store decides them all together.
//
//	go run ./examples/api                              # in-memory store
//	go run ./examples/api -redis redis://127.0.0.1:6379  # shared Redis store
//	curl -i -H 'X-API-Key: alice-key' http://127.0.0.1:8080/v1/items
//
// See README.md beside this file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/memory"
	"github.com/redlimit/redlimit/redisstore"
	"github.com/redlimit/redlimit/resilient"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	redisURL := flag.String("redis", "", "Redis `URL` to keep the limits in, as redis://host:port (default: in process memory)")
	prefix := flag.String("prefix", redisstore.DefaultPrefix, "prefix of the Redis keys")
	trust := flag.String("trust", "", "comma-separated `CIDRs` of reverse proxies whose X-Forwarded-For is believed")
	shadow := flag.Bool("shadow-writes", false, "run the writes limit as a dry run: log, never deny")
	flag.Parse()

	cfg := config{apiKeys: demoKeys, shadowWrites: *shadow}
	for s := range strings.SplitSeq(*trust, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "api: -trust: %v\n", err)
			os.Exit(2)
		}
		cfg.trusted = append(cfg.trusted, p)
	}
	if err := run(*addr, *redisURL, *prefix, cfg); err != nil {
		slog.Error("api", "err", err)
		os.Exit(1)
	}
}

func run(addr, redisURL, prefix string, cfg config) error {
	lim, closeStore, err := openStore(redisURL, prefix)
	if err != nil {
		return err
	}
	defer closeStore()
	h, err := newHandler(lim, cfg)
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
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
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openStore returns the memory store, or a resilient Limiter on Redis when
// redisURL is set, and a function that releases it.
func openStore(redisURL, prefix string) (redlimit.Limiter, func(), error) {
	if redisURL == "" {
		s, err := memory.New()
		if err != nil {
			return nil, nil, err
		}
		slog.Info("store=memory (no -redis given)")
		return s, func() { s.Close() }, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := resilient.Open(ctx, redisURL, resilient.Options{}, redisstore.WithPrefix(prefix))
	if err != nil {
		return nil, nil, err
	}
	slog.Info("store=redis", "redis", redisstore.Redacted(redisURL), "prefix", prefix)
	return l, func() { l.Close() }, nil
}
