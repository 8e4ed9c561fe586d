//go:build !windows

package redistest

import "syscall"

var (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)
