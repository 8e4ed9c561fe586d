package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/redisstore"
)

// Bounds of the wait between two attempts to open the store.
const (
	openFirstWait = 250 * time.Millisecond
	openMaxWait   = 4 * time.Second
)

// lazyStore is the Redis store, opened on the first attempt that succeeds.
// Until then each call fails with resilient.ErrStore, so the breaker and
// each rule's failure policy answer, as in an outage. Safe for concurrent
// use.
type lazyStore struct {
	open  func(context.Context) (*redisstore.Store, *redisstore.Registry, error)
	log   *slog.Logger
	store atomic.Pointer[redisstore.Store]
	nodes atomic.Pointer[redisstore.Registry]
	cause atomic.Pointer[error] // why the store is not open yet
	stop  context.CancelFunc    // ends the retries; nil without them
	done  chan struct{}         // closed once no retry runs
}

// errNotOpen is the error of each call until the store is open;
// resilient counts it as a store failure (resilient.ErrStore).
var errNotOpen = errors.New("server: Redis not reached since start-up")

// openLazy opens the store through open. An error that no retry can mend
// (see unreachable) is returned; otherwise the store is opened again in the
// background, with backoff, until it opens or Close is called.
func openLazy(ctx context.Context, log *slog.Logger, open func(context.Context) (*redisstore.Store, *redisstore.Registry, error)) (*lazyStore, error) {
	l := &lazyStore{open: open, log: log, done: make(chan struct{})}
	err := l.try(ctx)
	if err == nil {
		close(l.done)
		return l, nil
	}
	if !unreachable(err) {
		return nil, err
	}
	log.Warn("Redis not reached: serving by each rule's failure policy, not ready until it answers", "err", err)
	ctx, l.stop = context.WithCancel(context.Background())
	go l.retry(ctx)
	return l, nil
}

// try opens the store once, keeping the cause of a failure.
func (l *lazyStore) try(ctx context.Context) error {
	store, nodes, err := l.open(ctx)
	if err != nil {
		l.cause.Store(&err)
		return err
	}
	l.nodes.Store(nodes)
	l.store.Store(store)
	return nil
}

// retry opens the store until it opens or Close is called; one log line
// per failed attempt.
func (l *lazyStore) retry(ctx context.Context) {
	defer close(l.done)
	for wait := openFirstWait; ; wait = min(2*wait, openMaxWait) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := l.try(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		l.log.Warn("Redis not reached yet", "err", err, "retry_in", min(2*wait, openMaxWait))
	}
}

// unreachable reports whether err says Redis could not be reached (refused,
// reset, timed out, a name not resolved), which a later attempt may mend.
// A bad URL, bad credentials or a failed certificate check are settings:
// not these. A TLS handshake that times out is retried: the cause names
// it.
func unreachable(err error) bool {
	var (
		rec    tls.RecordHeaderError
		alert  tls.AlertError
		verify *tls.CertificateVerificationError
		unkCA  x509.UnknownAuthorityError
		host   x509.HostnameError
		op     *net.OpError
	)
	switch {
	case errors.As(err, &rec), errors.As(err, &alert), errors.As(err, &verify), errors.As(err, &unkCA), errors.As(err, &host):
		return false
	}
	return errors.As(err, &op) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// ready returns nil once the store is open and answers a PING.
func (l *lazyStore) ready(ctx context.Context) error {
	s := l.store.Load()
	if s == nil {
		return fmt.Errorf("not reached since start-up: %w", *l.cause.Load())
	}
	return s.Ping(ctx)
}

// Close stops opening the store and closes what is open.
func (l *lazyStore) Close() error {
	if l.stop != nil {
		l.stop()
	}
	<-l.done
	if n := l.nodes.Load(); n != nil {
		n.Close()
	}
	if s := l.store.Load(); s != nil {
		return s.Close()
	}
	return nil
}

// Nodes counts the live nodes once the store is open; 1 until then, since
// this node knows no peer.
func (l *lazyStore) Nodes() int {
	if n := l.nodes.Load(); n != nil {
		return n.Nodes()
	}
	return 1
}

// ReturnsByContext is true: redisstore.Open's stores batch, and until
// open each call returns at once.
func (l *lazyStore) ReturnsByContext() bool { return true }

// NotApplied reports whether err says a call did not run.
func (l *lazyStore) NotApplied(err error) bool {
	if errors.Is(err, errNotOpen) {
		return true
	}
	s := l.store.Load()
	return s != nil && s.NotApplied(err)
}

func (l *lazyStore) AllowN(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.AllowN(ctx, key, limit, n)
	}
	return redlimit.Result{}, errNotOpen
}

func (l *lazyStore) AllowAll(ctx context.Context, reqs []redlimit.Request) (redlimit.Decision, error) {
	if s := l.store.Load(); s != nil {
		return s.AllowAll(ctx, reqs)
	}
	return redlimit.Decision{}, errNotOpen
}

func (l *lazyStore) Peek(ctx context.Context, key string, limit redlimit.Limit, n int64) (redlimit.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.Peek(ctx, key, limit, n)
	}
	return redlimit.Result{}, errNotOpen
}

func (l *lazyStore) Reset(ctx context.Context, key string, limit redlimit.Limit) error {
	if s := l.store.Load(); s != nil {
		return s.Reset(ctx, key, limit)
	}
	return errNotOpen
}

func (l *lazyStore) Admit(ctx context.Context, reqs []redlimit.Request) (*redlimit.Grant, error) {
	if s := l.store.Load(); s != nil {
		return s.Admit(ctx, reqs)
	}
	return nil, errNotOpen
}

func (l *lazyStore) Refund(ctx context.Context, g *redlimit.Grant, back []int64) error {
	if s := l.store.Load(); s != nil {
		return s.Refund(ctx, g, back)
	}
	return errNotOpen
}

func (l *lazyStore) DebitOnce(ctx context.Context, req redlimit.Request, id string) (redlimit.Result, bool, error) {
	if s := l.store.Load(); s != nil {
		return s.DebitOnce(ctx, req, id)
	}
	return redlimit.Result{}, false, errNotOpen
}
