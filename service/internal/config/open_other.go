//go:build !unix

package config

import "os"

// openFlags opens a rule file for reading.
const openFlags = os.O_RDONLY
