//go:build windows

package redistest

import "syscall"

// Windows has no SIGSTOP/SIGCONT; Pause and Resume fail there.
var (
	sigStop = syscall.Signal(0x13)
	sigCont = syscall.Signal(0x12)
)
