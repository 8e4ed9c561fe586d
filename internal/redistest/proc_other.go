//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: Pdeathsig only exists on Linux.
func sysProcAttr() *syscall.SysProcAttr { return nil }
