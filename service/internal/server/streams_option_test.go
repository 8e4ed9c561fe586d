package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"golang.org/x/net/http2"
)

// GRPCMaxStreams is the most requests in flight on one connection, which
// HTTP/2 says in 32 bits (SETTINGS_MAX_CONCURRENT_STREAMS): a value it
// cannot say is an option error, not one cut to its low 32 bits (1<<32 was
// 0, which grpc-go takes for no cap at all; 1<<32+1 was 1).
func TestGRPCMaxStreamsTooLarge(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1 << 32, 1<<32 + 1} {
		srv, err := New(context.Background(), Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", GRPCMaxStreams: n, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			r := &running{Server: srv, cancel: func() {}, done: make(chan error, 1)}
			ctx, cancel := context.WithCancel(context.Background())
			go func() { r.done <- srv.Run(ctx) }()
			a := dialH2(t, srv.GRPCAddr())
			waitFor(t, "the server's settings", func() bool { _, ok := a.setting(http2.SettingInitialWindowSize); return ok })
			got, ok := a.setting(http2.SettingMaxConcurrentStreams)
			cancel()
			<-r.done
			if !ok {
				t.Errorf("GRPCMaxStreams %d: no error; the server sets no SETTINGS_MAX_CONCURRENT_STREAMS: streams without a cap", n)
			} else {
				t.Errorf("GRPCMaxStreams %d: no error; the server says SETTINGS_MAX_CONCURRENT_STREAMS %d", n, got)
			}
			continue
		}
		if !errors.Is(err, ErrOptions) {
			t.Errorf("GRPCMaxStreams %d: %v, not wrapping ErrOptions", n, err)
		}
	}
}
