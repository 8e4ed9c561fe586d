//go:build !unix

package server

import (
	"os"
	"path/filepath"
	"testing"
)

// mkfifo makes a directory at path, not a regular file either, where there
// are no FIFOs, and returns path.
func mkfifo(t *testing.T, path string) string {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(path)
}
