//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A named pipe as --config: the process says so and exits 1 at once. (It
// used to wait on the pipe for a writer, ignoring SIGTERM.)
func TestServeConfigNamedPipe(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "rules.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	p := tryStartProc(t, nil, "--config="+fifo)
	time.Sleep(200 * time.Millisecond)
	p.cmd.Process.Signal(syscall.SIGTERM)
	err := p.wait(10 * time.Second)
	if p.cmd.ProcessState == nil || p.cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1\n%s", err, p.logs.String())
	}
	if logs := p.logs.String(); !strings.Contains(logs, "not a regular file") {
		t.Errorf("the logs do not say why:\n%s", logs)
	}
}
