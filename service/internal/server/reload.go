package server

import (
	"context"
	"fmt"
	"slices"

	"github.com/redlimit/redlimit/service/internal/config"
	"github.com/redlimit/redlimit/service/internal/fswatch"
)

// Reload loads the configuration path again and, if it loads, makes it the
// one every new request uses. A configuration that does not load is logged,
// counted (redlimit_config_reloads_total{result="failure"}) and returned,
// and the one in use keeps serving. Reload is what SIGHUP and a change of
// the watched path do; it also moves the watches to where the path's links
// lead now. It is safe for concurrent use. A reload in progress
// when the server starts shutting down is abandoned: Reload then returns an
// error at once, and the load, left to finish on its own, changes nothing.
// With rules from xDS (Options.XDS), Reload does nothing: updates come
// from the xDS server.
func (s *Server) Reload() error {
	if s.xds != nil {
		s.log.Info("the rules come from xDS: nothing to reload", "source", s.configSource())
		return nil
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if w := s.watcher.Load(); w != nil {
		if err := w.Rearm(); err != nil { // a link may have moved unseen
			s.log.Warn("watching the configuration", "path", s.opts.ConfigPath, "err", err)
		}
	}
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
// no domains. It returns ctx's error as soon as ctx is done. The load then
// ends in the background. The config package bounds the work of a load,
// but not how long a read of a hung file system may wait.
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
		l := config.Loader{MaxFileBytes: s.opts.MaxConfigFileBytes, MaxTotalBytes: s.opts.MaxConfigBytes, MergeDomains: s.opts.MergeDomains, DefaultAlgorithm: s.opts.DefaultAlgorithm}
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
	s.log.Info("configuration loaded", "path", s.configSource(), "files", len(cfg.Files), "domains", domainNames(cfg), "rules", n)
}

func domainNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Domains))
	for name := range cfg.Domains {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// watch reloads the configuration when its path changes, until ctx is
// done (see package fswatch for what it sees).
func (s *Server) watch(ctx context.Context) (<-chan struct{}, error) {
	w, err := fswatch.New([]string{s.opts.ConfigPath}, fswatch.Options{Debounce: s.opts.ReloadDebounce, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("server: watching %s: %w", s.opts.ConfigPath, err)
	}
	s.watcher.Store(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func() {
			s.log.Info("configuration changed on disk, reloading", "path", s.opts.ConfigPath)
			s.Reload()
		})
	}()
	return done, nil
}
