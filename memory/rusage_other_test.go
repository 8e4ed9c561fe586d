//go:build !unix

package memory_test

import "time"

// processCPU is not measured on this platform.
func processCPU() time.Duration { return 0 }
