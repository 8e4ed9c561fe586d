//go:build unix

package config

import (
	"os"
	"syscall"
)

// openFlags opens a rule file for reading without waiting: a named pipe
// opens at once (and is then refused), rather than when a writer comes.
const openFlags = os.O_RDONLY | syscall.O_NONBLOCK
