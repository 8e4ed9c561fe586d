package tlsreload

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Watch watches the files' directories until ctx is done, and loads the
// files again (as [Reloader.Reload] does) once Options.Debounce has passed
// after a change without another. It watches directories, not files, so
// that it sees every way a file is replaced: written in place, renamed
// over, or swapped behind a symbolic link (the directory of each file, and
// the directory its links lead to, watched again after every load, as a
// swap changes it). The returned channel is closed when the watch has
// stopped. An error means nothing is watched.
func (r *Reloader) Watch(ctx context.Context) (<-chan struct{}, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("tlsreload: watching %s: %w", r.files.Cert, err)
	}
	if err := r.add(fw); err != nil {
		fw.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.watch(ctx, fw)
	}()
	return done, nil
}

// add watches the directories of the files and of what their links lead
// to.
func (r *Reloader) add(fw *fsnotify.Watcher) error {
	var dirs []string
	for _, f := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if f == "" {
			continue
		}
		dirs = append(dirs, filepath.Dir(f))
		if real, err := filepath.EvalSymlinks(f); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	var errs []error
	for _, d := range dirs {
		if slices.Contains(fw.WatchList(), d) {
			continue
		}
		if err := fw.Add(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(dirs) && len(errs) > 0 {
		return fmt.Errorf("tlsreload: watching %s: %w", r.files.Cert, errors.Join(errs...))
	}
	return nil
}

func (r *Reloader) watch(ctx context.Context, fw *fsnotify.Watcher) {
	defer fw.Close()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			debounce.Stop()
			return
		case ev, ok := <-fw.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			debounce.Reset(r.opts.Debounce)
		case err, ok := <-fw.Errors:
			if !ok {
				return
			}
			r.opts.Logger.Warn("watching the TLS files", "cert", r.files.Cert, "err", err)
		case <-debounce.C:
			r.Reload()
			if err := r.add(fw); err != nil {
				r.opts.Logger.Warn("watching the TLS files", "err", err)
			}
		}
	}
}
