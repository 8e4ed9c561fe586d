// Package fswatch tells when files named by path change, however they are
// replaced. A file may be written in place, or renamed over (editors,
// atomic writes). It may be swapped behind a symbolic link anywhere on its
// path. A release switch does that: ln -sfn new tmp && mv -T tmp current.
// So does a Kubernetes ConfigMap or Secret volume, whose "..data" link is
// renamed to a new directory.
//
// It watches directories, not files. For each path it watches the
// directory holding what the path leads to; every change there counts. It
// watches the directory holding the path, each symbolic link on the way,
// and where each leads. There only changes of that name count. After each
// change it resolves the paths again, and moves its watches to where they
// lead now.
package fswatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
)

// maxLinks bounds the symbolic links followed for one path, as the
// kernel's own bound on a lookup does.
const maxLinks = 40

// Options configure a [Watcher]; the zero value of each field is its
// default.
type Options struct {
	// Debounce is how long the watched directories must stay quiet after
	// a change before Changed is called (default 100ms), so that files
	// written one after the other are read together.
	Debounce time.Duration
	// Logger receives a line for each watch that cannot be set (default
	// slog.Default()).
	Logger *slog.Logger
}

// Watcher watches paths. Its methods are safe for concurrent use.
type Watcher struct {
	paths []string
	opts  Options
	fw    *fsnotify.Watcher

	mu   sync.Mutex
	dirs map[string]map[string]bool // dir → names that count; nil: all
}

// New watches paths, as the package doc says. An error means none of the
// directories could be watched.
func New(paths []string, opts Options) (*Watcher, error) {
	if opts.Debounce <= 0 {
		opts.Debounce = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("fswatch: %w", err)
	}
	w := &Watcher{paths: paths, opts: opts, fw: fw}
	if err := w.Rearm(); err != nil {
		fw.Close()
		return nil, err
	}
	return w, nil
}

// Rearm resolves the paths again and moves the watches to where they lead
// now. Run does it after every change; a reload asked by hand (SIGHUP)
// should too. Its error means no directory is watched.
func (w *Watcher) Rearm() error {
	dirs := map[string]map[string]bool{}
	for _, p := range w.paths {
		targets(p, dirs)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dirs = dirs
	// fsnotify drops the watch of a directory removed or moved.
	armed := w.fw.WatchList()
	for _, d := range armed {
		if _, ok := dirs[d]; !ok {
			w.fw.Remove(d)
		}
	}
	var errs []error
	for d := range dirs {
		if slices.Contains(armed, d) {
			continue
		}
		if err := w.fw.Add(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		err := fmt.Errorf("fswatch: watching %v: %w", w.paths, errors.Join(errs...))
		if len(errs) == len(dirs) {
			return err
		}
		w.opts.Logger.Warn("some changes of these files will not be seen", "err", err)
	}
	return nil
}

// counts reports whether a change of name matters.
func (w *Watcher) counts(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	names, ok := w.dirs[filepath.Dir(name)]
	return ok && (names == nil || names[filepath.Base(name)])
}

// Run calls changed once Options.Debounce has passed after a change
// without another, until ctx is done; it then closes the watcher. Before
// each call it rearms the watches.
func (w *Watcher) Run(ctx context.Context, changed func()) {
	defer w.fw.Close()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			debounce.Stop()
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod || !w.counts(ev.Name) {
				continue
			}
			debounce.Reset(w.opts.Debounce)
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			w.opts.Logger.Warn("watching files", "paths", w.paths, "err", err)
		case <-debounce.C:
			if err := w.Rearm(); err != nil {
				w.opts.Logger.Warn("watching files", "err", err)
			}
			changed()
		}
	}
}

// targets adds to dirs what to watch for path. For that name, it adds the
// directory holding the path, each link on its way, and where each leads.
// For every name, it adds the directory where the path leads. Parts that
// do not resolve are left out.
func targets(path string, dirs map[string]map[string]bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return
	}
	real, ok := resolve(abs, dirs, 0, true)
	if !ok {
		return
	}
	fi, err := os.Stat(real)
	if err != nil {
		return
	}
	if !fi.IsDir() {
		real = filepath.Dir(real)
	}
	dirs[real] = nil
}

// resolve returns the real path of abs, an absolute clean path. It adds
// to dirs, by name in its real directory, each link it follows and where
// each leads, and abs itself when self is set. ok is false when a directory on the way does
// not resolve; abs itself may be missing, as its creation counts.
func resolve(abs string, dirs map[string]map[string]bool, hops int, self bool) (real string, ok bool) {
	parent, base := filepath.Dir(abs), filepath.Base(abs)
	if parent == abs { // the root
		return abs, true
	}
	realParent, ok := resolve(parent, dirs, hops, false)
	if !ok {
		return "", false
	}
	name := filepath.Join(realParent, base)
	if self {
		watchName(dirs, realParent, base)
	}
	fi, err := os.Lstat(name)
	if err != nil {
		return name, self
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		return name, true
	}
	watchName(dirs, realParent, base)
	target, err := os.Readlink(name)
	if err != nil || hops >= maxLinks {
		return "", false
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(realParent, target)
	}
	return resolve(filepath.Clean(target), dirs, hops+1, true)
}

// watchName makes a change of name in dir count, unless every change in
// dir already does.
func watchName(dirs map[string]map[string]bool, dir, name string) {
	names, ok := dirs[dir]
	if ok && names == nil {
		return
	}
	if names == nil {
		names = map[string]bool{}
		dirs[dir] = names
	}
	names[name] = true
}
