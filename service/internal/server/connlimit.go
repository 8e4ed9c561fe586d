package server

import (
	"context"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connBounds bound the connections of an HTTP listener.
type connBounds struct {
	// max is how many may be open at once; past it a new connection is
	// closed at once and counted in refused.
	max     int
	refused prometheus.Counter
	// age is how long one may live, plus or minus 10%; zero: for ever.
	age time.Duration
}

// limitConnections returns ln with its connections bounded by b. So
// clients which hold connections open cannot take the process's file
// descriptors and memory. A client refused by a reloaded client CA loses
// its open connections within b.age.
func limitConnections(ln net.Listener, b connBounds) net.Listener {
	return &limitedListener{Listener: ln, b: b}
}

type limitedListener struct {
	net.Listener
	b    connBounds
	open atomic.Int64
}

// Accept returns the next connection while fewer than max are open.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > int64(l.b.max) {
			l.open.Add(-1)
			l.b.refused.Inc()
			c.Close()
			continue
		}
		lc := &limitedConn{Conn: c, l: l}
		if l.b.age > 0 {
			// Jittered as gRPC's, so that clients do not all reconnect at once.
			age := l.b.age - l.b.age/10 + rand.N(l.b.age/5+1)
			lc.end = time.Now().Add(age)
			lc.timer = time.AfterFunc(age+maxConnectionAgeGrace, func() { lc.Close() })
		}
		return lc, nil
	}
}

// limitedConn gives its place back when it is closed, once.
type limitedConn struct {
	net.Conn
	l     *limitedListener
	end   time.Time   // when it should close; zero: never
	timer *time.Timer // closes it a grace period after end
	once  sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		if c.timer != nil {
			c.timer.Stop()
		}
		c.l.open.Add(-1)
	})
	return c.Conn.Close()
}

// connEndKey is the context key of a connection's end (connContext).
type connEndKey struct{}

// connContext is http.Server.ConnContext: it gives the requests of a
// limitedConn the time their connection should end.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if lc, ok := c.(*limitedConn); ok && !lc.end.IsZero() {
		return context.WithValue(ctx, connEndKey{}, lc.end)
	}
	return ctx
}

// closeAged has the server close a connection past its end after the
// response: its client connects again, as after gRPC's GOAWAY.
func closeAged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if end, ok := r.Context().Value(connEndKey{}).(time.Time); ok && !time.Now().Before(end) {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
