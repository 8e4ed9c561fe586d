//go:build unix

package redistest

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Exclusive holds, until tb ends, a lock that every test binary on the
// machine shares. The fault tests that time a failover, or bound what it
// over-admits, take it. go test may run them in packages at once. On a
// small machine they would measure each other's load. Other tests still
// run beside them.
func Exclusive(tb testing.TB) {
	tb.Helper()
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "redlimit-redistest-fault.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		tb.Fatalf("redistest: fault-test lock: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		tb.Fatalf("redistest: fault-test lock: %v", err)
	}
	tb.Cleanup(func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}
