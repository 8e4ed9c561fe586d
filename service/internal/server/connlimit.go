package server

import (
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// limitConnections returns ln with at most max connections open at once: a
// connection accepted past it is closed at once and counted in
// redlimit_http_connections_refused_total, so that clients which hold
// connections open cannot take the process's file descriptors and memory.
func limitConnections(ln net.Listener, max int, reg prometheus.Registerer) (net.Listener, error) {
	l := &limitedListener{Listener: ln, max: int64(max), refused: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "redlimit_http_connections_refused_total",
		Help: "HTTP connections closed on arrival because --http-max-connections were open.",
	})}
	return l, reg.Register(l.refused)
}

type limitedListener struct {
	net.Listener
	max     int64
	open    atomic.Int64
	refused prometheus.Counter
}

// Accept returns the next connection while fewer than max are open.
func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			l.refused.Inc()
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l}, nil
	}
}

// limitedConn gives its place back when it is closed, once.
type limitedConn struct {
	net.Conn
	l    *limitedListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}
