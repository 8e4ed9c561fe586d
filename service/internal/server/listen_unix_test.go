//go:build unix

package server

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestListenUnix: a Unix socket has the mode asked from the start, replaces
// a socket left by a process that is gone, refuses one still served and a
// file that is not a socket, and is removed when closed.
func TestListenUnix(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "grpc.sock")
	ln, err := listen("unix:"+path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v, %v; want a socket of mode 0600", fi.Mode(), err)
	}
	if got := addrString(ln); got != "unix:"+path {
		t.Fatalf("address %q, want unix:%s", got, path)
	}
	go func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}(ln)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("connecting: %v", err)
	}
	c.Close()
	if _, err := listen("unix:"+path, 0o600); err == nil {
		t.Fatal("a second listener took a socket that is served")
	}
	ln.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket after Close: %v; want it removed", err)
	}

	// A socket whose process is gone: replaced.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	ln, err = listen("unix://"+path, 0o660)
	if err != nil {
		t.Fatalf("over a stale socket: %v", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("the new socket: %v, %v; want mode 0660", fi.Mode(), err)
	}
	ln.Close()

	// Not a socket: left alone.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := listen("unix:"+file, 0o600); !errors.Is(err, ErrOptions) {
		t.Fatalf("over a regular file: %v; want ErrOptions", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Fatalf("the regular file: %q, %v", b, err)
	}
	if _, err := listen("unix:", 0o600); !errors.Is(err, ErrOptions) {
		t.Fatalf("no path: %v", err)
	}
	if _, err := listen("unix:"+filepath.Join(dir, "x.sock"), 0o4755); !errors.Is(err, ErrOptions) {
		t.Fatalf("a mode with setuid: %v", err)
	}
}
