//go:build unix

package config

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestLoadNotRegular checks that only regular files are read: a FIFO (whose
// open would block until a writer comes), a device and a socket are errors
// naming the file, given at once, whether named as the path, found in a
// directory, or reached by a symbolic link. Links to regular files, as in a
// ConfigMap volume, still load (TestLoadConfigMap).
func TestLoadNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "s.yaml")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	linkDir := t.TempDir()
	if err := os.Symlink(fifo, filepath.Join(linkDir, "api.yaml")); err != nil {
		t.Fatal(err)
	}
	devDir := t.TempDir()
	if err := os.Symlink("/dev/zero", filepath.Join(devDir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct{ path, file string }{
		{fifo, fifo},
		{dir, fifo},
		{sockDir, sock},
		{linkDir, filepath.Join(linkDir, "api.yaml")},
		{"/dev/zero", "/dev/zero"},
		{devDir, filepath.Join(devDir, "zero.yaml")},
	} {
		err := within(t, 5*time.Second, func() error {
			_, err := Load(tc.path)
			return err
		})
		var e *Error
		if !errors.Is(err, ErrNotRegular) || !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.File != tc.file {
			t.Errorf("Load(%s): got %v, want ErrNotRegular naming %s", tc.path, err, tc.file)
		} else if !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Load(%s): %v", tc.path, err)
		}
	}
}
