package server

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// A connGuard bounds what the clients of the gRPC server can make it hold
// over all connections. grpc-go's settings bound only each connection. It
// bounds the number of connections, and the memory the open streams hold.
//
// grpc-go keeps what a stream received until its message is complete. Each
// DATA frame is a buffer of its own. So a message sent in frames of one
// byte costs many times its size while it waits for the rest
// (docs/SECURITY.md). grpc-go keeps a stream, with its header fields,
// until its answer is written. A client that reads nothing can put that
// off until the connection's maximum age.
//
// The guard follows the HTTP/2 frames of each connection in both
// directions, without changing them. It counts streamCost for every open
// stream. A stream is open from the client's HEADERS to the END_STREAM or
// RST_STREAM that ends it on the server's side, or the client's
// RST_STREAM. It counts the length of each DATA frame it received, plus
// frameCost. When the count over all connections passes maxHeld, it
// closes the connection that holds the most. That ends its streams and
// frees what they held.
//
// The guard reads cleartext HTTP/2. With TLS, it wraps the TLS connection
// (see tlsListener) and reads the decrypted frames.
type connGuard struct {
	maxConns int
	maxHeld  int64
	log      *slog.Logger

	pending atomic.Int64 // held over all connections
	active  atomic.Int64 // connections open

	mu    sync.Mutex
	conns map[*guardedConn]struct{}

	refused atomic.Int64 // connections closed at once at maxConns
	shed    atomic.Int64 // connections closed over maxHeld

	logs throttle // of refusals and shedding
}

// Costs the guard counts, measured on grpc-go 1.85.
const (
	// frameCost is what grpc-go holds for each DATA frame besides its
	// data until the message is complete: its buffer and the slices that
	// track it.
	frameCost = 64
	// streamCost is what an open stream holds besides its message: the
	// stream, its header fields, and the goroutine that waits for its
	// message. It assumes header fields up to maxHeaderListBytes
	// (TestMemoryBounds).
	streamCost = 32 << 10
)

// errShed is the read error of a connection the guard closed; the guard
// logs why.
var errShed = errors.New("server: gRPC connection closed by the guard")

func newConnGuard(maxConns int, maxHeld int64, log *slog.Logger) *connGuard {
	return &connGuard{maxConns: maxConns, maxHeld: maxHeld, log: log, conns: map[*guardedConn]struct{}{}}
}

// listener returns ln with every accepted connection guarded; a connection
// past maxConns is closed at once.
func (g *connGuard) listener(ln net.Listener) net.Listener {
	return &guardListener{Listener: ln, g: g}
}

type guardListener struct {
	net.Listener
	g *connGuard
}

// Accept returns the next connection within the cap; it closes those past
// it without handing them to the server.
func (l *guardListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g := l.g
		if g.active.Add(1) > int64(g.maxConns) {
			g.active.Add(-1)
			g.refused.Add(1)
			g.warn("gRPC connection refused: at the connection cap", "remote", c.RemoteAddr().String(), "max_connections", g.maxConns)
			c.Close()
			continue
		}
		if err := setUserTimeout(c, keepaliveTimeout); err != nil {
			g.warn("gRPC connection: TCP_USER_TIMEOUT not set", "remote", c.RemoteAddr().String(), "err", err)
		}
		gc := &guardedConn{Conn: c, g: g, streams: map[uint32]int64{}}
		gc.in.skip = len(http2Preface)
		g.mu.Lock()
		g.conns[gc] = struct{}{}
		g.mu.Unlock()
		return gc, nil
	}
}

// warn logs through the guard's throttle.
func (g *connGuard) warn(msg string, args ...any) {
	if ok, held := g.logs.allow(); ok {
		g.log.Warn(msg, append(args, "not_logged", held)...)
	}
}

// overBudget closes the connection that holds the most.
func (g *connGuard) overBudget() {
	g.mu.Lock()
	var victim *guardedConn
	for c := range g.conns {
		if victim == nil || c.held.Load() > victim.held.Load() {
			victim = c
		}
	}
	g.mu.Unlock()
	if victim == nil {
		return
	}
	g.shed.Add(1)
	g.warn("gRPC connection closed: its streams held the most when the bytes held passed the cap",
		"remote", victim.RemoteAddr().String(), "held_bytes", victim.held.Load(), "max_pending_bytes", g.maxHeld)
	victim.Close()
}

// http2Preface starts every HTTP/2 connection a client opens.
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame types and flags the guard follows (RFC 9113, section 6).
const (
	frameData      = 0x0
	frameHeaders   = 0x1
	frameRSTStream = 0x3
	flagEndStream  = 0x1
)

// frameScanner finds the frame headers in an HTTP/2 byte stream read or
// written in pieces of any size.
type frameScanner struct {
	skip int // preface bytes still to pass
	hdr  [9]byte
	hdrN int // bytes of hdr seen
	left int // payload bytes of the current frame still to pass
}

// scan calls frame for each frame header that b completes, in order, until
// frame returns true; it reports whether one did.
func (s *frameScanner) scan(b []byte, frame func(typ, flags byte, id uint32, length int) bool) bool {
	for len(b) > 0 {
		switch {
		case s.skip > 0:
			k := min(s.skip, len(b))
			s.skip -= k
			b = b[k:]
		case s.left > 0:
			k := min(s.left, len(b))
			s.left -= k
			b = b[k:]
		default:
			k := copy(s.hdr[s.hdrN:], b)
			s.hdrN += k
			b = b[k:]
			if s.hdrN < len(s.hdr) {
				return false
			}
			s.hdrN = 0
			s.left = int(s.hdr[0])<<16 | int(s.hdr[1])<<8 | int(s.hdr[2])
			id := binary.BigEndian.Uint32(s.hdr[5:]) & (1<<31 - 1)
			if frame(s.hdr[3], s.hdr[4], id, s.left) {
				return true
			}
		}
	}
	return false
}

// guardedConn is a connection whose frames the guard follows. grpc-go reads
// from one goroutine and writes from one other; Close may run on any.
type guardedConn struct {
	net.Conn
	g *connGuard

	in  frameScanner // used by Read only
	out frameScanner // used by Write only

	mu      sync.Mutex
	streams map[uint32]int64 // what each open stream holds
	closed  bool
	held    atomic.Int64 // the sum of streams; written under mu
	once    sync.Once
}

// Read reads from the connection and follows the client's frames.
func (c *guardedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.in.scan(p[:n], c.received) {
		c.Close()
		return 0, errShed
	}
	return n, err
}

// Write follows the server's frames and writes them.
func (c *guardedConn) Write(p []byte) (int, error) {
	c.out.scan(p, c.sent)
	return c.Conn.Write(p)
}

// received counts a frame from the client, and reports whether the
// connection is to be closed.
func (c *guardedConn) received(typ, flags byte, id uint32, length int) bool {
	var cost int64
	switch typ {
	case frameHeaders:
		cost = streamCost
	case frameData:
		cost = int64(length) + frameCost
	case frameRSTStream:
		c.end(id)
		return false
	default:
		return false
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return true
	}
	n, open := c.streams[id]
	switch {
	case typ == frameHeaders && open: // trailers: the stream costs no more
		c.mu.Unlock()
		return false
	case typ == frameData && !open: // the server has ended it, and drops what comes
		c.mu.Unlock()
		return false
	}
	c.streams[id] = n + cost
	c.held.Add(cost)
	total := c.g.pending.Add(cost)
	c.mu.Unlock()
	if total > c.g.maxHeld {
		c.g.overBudget()
		return c.isClosed()
	}
	return false
}

// sent follows a frame of the server's: one that ends a stream ends what
// the stream holds.
func (c *guardedConn) sent(typ, flags byte, id uint32, _ int) bool {
	if typ == frameRSTStream || (typ == frameHeaders || typ == frameData) && flags&flagEndStream != 0 {
		c.end(id)
	}
	return false
}

// end stops counting stream id.
func (c *guardedConn) end(id uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.streams[id]
	if !ok {
		return
	}
	delete(c.streams, id)
	if !c.closed {
		c.held.Add(-n)
		c.g.pending.Add(-n)
	}
}

func (c *guardedConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Close closes the connection and stops counting what it held.
func (c *guardedConn) Close() error {
	c.once.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.g.pending.Add(-c.held.Swap(0))
		clear(c.streams)
		c.mu.Unlock()
		c.g.mu.Lock()
		delete(c.g.conns, c)
		c.g.mu.Unlock()
		c.g.active.Add(-1)
	})
	return c.Conn.Close()
}

// register adds the guard's metrics to reg:
//
//	redlimit_grpc_connections                gRPC connections open
//	redlimit_grpc_connections_refused_total  connections closed at once, at GRPCMaxConnections
//	redlimit_grpc_connections_shed_total     connections closed when the bytes held passed the cap
//	redlimit_grpc_pending_bytes              what the open streams hold, as the guard counts it
func (g *connGuard) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlimit_grpc_connections", Help: "gRPC connections open."},
			func() float64 { return float64(g.active.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "redlimit_grpc_connections_refused_total", Help: "gRPC connections closed at once because GRPCMaxConnections were open."},
			func() float64 { return float64(g.refused.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "redlimit_grpc_connections_shed_total", Help: "gRPC connections closed because the open streams held more than GRPCMaxPendingBytes (the connection holding the most)."},
			func() float64 { return float64(g.shed.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "redlimit_grpc_pending_bytes", Help: "What the open gRPC streams hold, as the guard counts it: a fixed cost per stream and the frames received."},
			func() float64 { return float64(g.pending.Load()) }),
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
