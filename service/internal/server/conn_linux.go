//go:build linux

package server

import (
	"net"
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT of linux/tcp.h, the same on every
// architecture (package syscall names it on some only).
const tcpUserTimeout = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT on c, or on the TCP connection
// beneath c's TLS. grpc-go does so on the TCP connections it is given. The
// guard hands it a wrapper, which it leaves alone. Data unacknowledged for
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
