//go:build !linux

package server

import (
	"net"
	"time"
)

// setUserTimeout does nothing where grpc-go sets no TCP_USER_TIMEOUT.
func setUserTimeout(net.Conn, time.Duration) error { return nil }

// initReady does nothing where grpc-go reads every connection through a
// buffer of its own.
func (c *guardedConn) initReady() {}

// readyState is unused where initReady does nothing.
type readyState struct{}
