//go:build !unix

package redistest

import "testing"

// Exclusive does nothing where there is no flock: see exclusive_unix.go.
func Exclusive(tb testing.TB) {}
