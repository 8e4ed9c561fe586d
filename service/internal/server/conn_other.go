//go:build !linux

package server

import (
	"net"
	"time"
)

// setUserTimeout does nothing where grpc-go sets no TCP_USER_TIMEOUT.
func setUserTimeout(net.Conn, time.Duration) error { return nil }
