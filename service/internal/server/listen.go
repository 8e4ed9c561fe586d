package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultUnixSocketMode is Options.UnixSocketMode's default: the socket's
// owner and group may connect.
const DefaultUnixSocketMode os.FileMode = 0o660

// unixPrefix starts a listen address that is a Unix socket's path.
const unixPrefix = "unix:"

// listen returns a listener on addr: host:port (TCP), or unix:PATH (also
// written unix:///PATH for an absolute path, as gRPC names it) for a Unix
// socket with permission bits perm.
func listen(addr string, perm os.FileMode) (net.Listener, error) {
	path, ok := strings.CutPrefix(addr, unixPrefix)
	if !ok {
		return net.Listen("tcp", addr)
	}
	if rest, ok := strings.CutPrefix(path, "//"); ok {
		path = rest
	}
	if path == "" {
		return nil, fmt.Errorf("%w: %q names no socket path", ErrOptions, addr)
	}
	return listenUnix(path, perm)
}

// listenUnix makes a Unix socket at path, with permission bits perm from
// its first moment. It binds a socket under a temporary name, sets its
// mode, and renames it to path. So no client can connect while its mode
// is the umask's. A socket left at path by a process that is gone is
// replaced. One that a process still serves, or a file that is not a
// socket, is an error.
func listenUnix(path string, perm os.FileMode) (net.Listener, error) {
	if perm&^os.ModePerm != 0 {
		return nil, fmt.Errorf("%w: Unix socket mode %#o has bits besides the permissions", ErrOptions, perm)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%w: %s exists and is not a socket", ErrOptions, path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("server: listen unix %s: a process serves it already", path)
		}
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	os.Remove(tmp) // a leftover of a start that failed
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("server: listen unix %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ln.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("server: listen unix %s: %w", path, err)
	}
	if err := os.Chmod(tmp, perm); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return &unixListener{UnixListener: ln, path: path, fi: fi}, nil
}

// unixListener is a Unix socket listener that removes its socket when it
// is closed, unless another has taken the path since.
type unixListener struct {
	*net.UnixListener
	path string
	fi   os.FileInfo
}

// Addr returns the socket's path, not the temporary name it was bound to.
func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Close closes the listener and removes its socket.
func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.fi) {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// addrString returns a listener's address as a client names it:
// host:port, or unix:PATH.
func addrString(ln net.Listener) string {
	a := ln.Addr()
	if a.Network() == "unix" {
		return unixPrefix + a.String()
	}
	return a.String()
}
