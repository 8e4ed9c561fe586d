package tlsreload

import (
	"context"
	"fmt"

	"github.com/redlimit/redlimit/service/internal/fswatch"
)

// Watch watches the files until ctx is done, and loads them again (as
// [Reloader.Reload] does) once Options.Debounce has passed after a change
// without another. It sees a file written in place, renamed over, or
// swapped behind a symbolic link anywhere on its path (package fswatch).
// The returned channel is closed when the watch has stopped. An error
// means nothing is watched.
func (r *Reloader) Watch(ctx context.Context) (<-chan struct{}, error) {
	var paths []string
	for _, f := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if f != "" {
			paths = append(paths, f)
		}
	}
	w, err := fswatch.New(paths, fswatch.Options{Debounce: r.opts.Debounce, Logger: r.opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("tlsreload: watching %s: %w", r.files.Cert, err)
	}
	r.watcher.Store(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() { r.Reload() })
	}()
	return done, nil
}
