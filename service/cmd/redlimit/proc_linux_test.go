//go:build linux

package main

import "syscall"

// sysProcAttr makes the kernel kill a service process when the test binary dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
