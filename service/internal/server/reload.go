package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/redlimit/redlimit/service/internal/config"
)

// Reload loads the configuration path again and, if it loads, makes it the
// one every new request uses. A configuration that does not load is logged,
// counted (redlimit_config_reloads_total{result="failure"}) and returned,
// and the one in use keeps serving. Reload is what SIGHUP and a change of
// the watched path do; it is safe for concurrent use. A reload in progress
// when the server starts shutting down is abandoned: Reload then returns an
// error at once, and the load, left to finish on its own, changes nothing.
func (s *Server) Reload() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cfg, err := s.load(s.life)
	if err != nil {
		if s.life.Err() != nil {
			s.log.Info("configuration reload abandoned: shutting down", "path", s.opts.ConfigPath)
			return fmt.Errorf("server: reload abandoned, shutting down: %w", err)
		}
		s.metrics.ReloadFailed()
		s.log.Error("configuration rejected; the previous one keeps serving", "path", s.opts.ConfigPath, "err", err)
		return err
	}
	s.setConfig(cfg)
	return nil
}

// load loads the configuration path; an empty path is a configuration with
// no domains. It returns ctx's error as soon as ctx is done, leaving the
// load to end in the background: the config package bounds the work of a
// load, but not how long a read of a hung file system may wait.
func (s *Server) load(ctx context.Context) (*config.Config, error) {
	if s.opts.ConfigPath == "" {
		s.log.Warn("no configuration named (--config): no rules, every request is allowed")
		return config.New()
	}
	type result struct {
		cfg *config.Config
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r = result{err: fmt.Errorf("config: panic loading %s: %v", s.opts.ConfigPath, p)}
			}
			done <- r
		}()
		l := config.Loader{MaxFileBytes: s.opts.MaxConfigFileBytes, MaxTotalBytes: s.opts.MaxConfigBytes, MergeDomains: s.opts.MergeDomains}
		r.cfg, r.err = s.opts.loadConfig(ctx, l, s.opts.ConfigPath)
	}()
	select {
	case r := <-done:
		return r.cfg, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("config: loading %s: %w", s.opts.ConfigPath, ctx.Err())
	}
}

// setConfig puts cfg in service, counts and logs it.
func (s *Server) setConfig(cfg *config.Config) {
	s.svc.SetConfig(cfg)
	n := len(cfg.Rules())
	if s.metrics != nil {
		s.metrics.Reloaded(n)
	}
	s.log.Info("configuration loaded", "path", s.opts.ConfigPath, "files", len(cfg.Files), "domains", domainNames(cfg), "rules", n)
}

func domainNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Domains))
	for name := range cfg.Domains {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// watcher reloads the configuration when its path changes. It watches
// directories, not files, so that it sees every way a file is replaced:
// written in place, renamed over (editors, atomic writes), or swapped
// behind a symbolic link (a Kubernetes ConfigMap volume renames its
// "..data" link to a new directory). It watches the config directory, or
// the directory holding the config file, and the directory the file's
// symbolic links lead to; any change there, once Options.ReloadDebounce
// has passed without another, reloads.
type watcher struct {
	s *Server
	w *fsnotify.Watcher
}

func (s *Server) newWatcher() (*watcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("server: watching %s: %w", s.opts.ConfigPath, err)
	}
	w := &watcher{s: s, w: fw}
	if err := w.add(); err != nil {
		fw.Close()
		return nil, err
	}
	return w, nil
}

// add watches the directories of the config path; they may have changed
// since the last time, when a link was swapped.
func (w *watcher) add() error {
	path := w.s.opts.ConfigPath
	var dirs []string
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		dirs = append(dirs, path)
	} else {
		dirs = append(dirs, filepath.Dir(path))
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		if fi, err := os.Stat(real); err == nil && !fi.IsDir() {
			real = filepath.Dir(real)
		}
		dirs = append(dirs, real)
	}
	var errs []error
	for _, d := range dirs {
		if slices.Contains(w.w.WatchList(), d) {
			continue
		}
		if err := w.w.Add(d); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(dirs) {
		return fmt.Errorf("server: watching %s: %w", path, errors.Join(errs...))
	}
	return nil
}

// run reloads after changes until ctx is done, then closes the watcher.
func (w *watcher) run(ctx context.Context) {
	defer w.w.Close()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			debounce.Stop()
			return
		case ev, ok := <-w.w.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			debounce.Reset(w.s.opts.ReloadDebounce)
		case err, ok := <-w.w.Errors:
			if !ok {
				return
			}
			w.s.log.Warn("watching the configuration", "path", w.s.opts.ConfigPath, "err", err)
		case <-debounce.C:
			w.s.log.Info("configuration changed on disk, reloading", "path", w.s.opts.ConfigPath)
			w.s.Reload()
			if err := w.add(); err != nil {
				w.s.log.Warn("watching the configuration", "err", err)
			}
		}
	}
}
