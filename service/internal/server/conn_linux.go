//go:build linux

package server

import (
	"io"
	"net"
	"syscall"
	"time"

	"google.golang.org/grpc/mem"
)

// tcpUserTimeout is TCP_USER_TIMEOUT of linux/tcp.h, the same on every
// architecture (package syscall names it on some only).
const tcpUserTimeout = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT on c, or on the TCP connection
// beneath c's TLS, as grpc-go does on the TCP connections it is given (the
// guard hands it a wrapper, which it leaves alone): data unacknowledged for
// d closes the connection.
func setUserTimeout(c net.Conn, d time.Duration) error {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d/time.Millisecond))
	}); err != nil {
		return err
	}
	return serr
}

// readyState is the request and the result of one ReadOnReady.
type readyState struct {
	size int
	pool mem.BufferPool
	buf  *[]byte
	n    int
	err  error
}

// initReady prepares ReadOnReady's reads on the descriptor of a TCP
// connection; on another, ReadOnReady reads through Read.
func (c *guardedConn) initReady() {
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok {
		return
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	c.raw = raw
	c.readFD = func(fd uintptr) bool { // kept in a field: a closure made per read would be allocated
		r := &c.ready
		r.buf = r.pool.Get(r.size)
		r.n, r.err = syscall.Read(int(fd), *r.buf)
		if r.err != nil {
			r.pool.Put(r.buf)
			r.buf = nil
		}
		return r.err != syscall.EAGAIN && r.err != syscall.EWOULDBLOCK
	}
}

// ReadOnReady waits until the connection has something to read, then reads
// it into a buffer of size bytes from pool, and follows the frames read.
// grpc-go's transport reads through this method when a connection has it
// (the Reader interface of its internal readyreader package), as it reads
// an unwrapped TCP connection: an idle connection then holds no read buffer
// (a bufio.Reader of 32 KiB otherwise, 30 KB measured per connection).
func (c *guardedConn) ReadOnReady(size int, pool mem.BufferPool) (*[]byte, int, error) {
	if c.raw == nil {
		buf := pool.Get(size)
		n, err := c.Read(*buf)
		if err != nil {
			pool.Put(buf)
			return nil, 0, err
		}
		return buf, n, nil
	}
	c.ready = readyState{size: size, pool: pool}
	err := c.raw.Read(c.readFD)
	r := c.ready
	c.ready = readyState{}
	switch {
	case err != nil:
		if r.buf != nil {
			pool.Put(r.buf)
		}
		return nil, 0, err
	case r.err != nil:
		return nil, 0, r.err
	case r.n == 0:
		pool.Put(r.buf)
		return nil, 0, io.EOF
	}
	if c.in.scan((*r.buf)[:r.n], c.received) {
		pool.Put(r.buf)
		c.Close()
		return nil, 0, errShed
	}
	return r.buf, r.n, nil
}
