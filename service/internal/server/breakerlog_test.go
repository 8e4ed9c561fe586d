package server

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
)

// TestBreakerLogged: a Redis frozen for 3 s, under steady traffic, flips
// the breaker open and half-open many times; the log says when it opened
// and why (the store's error), and when it closed, a few lines in all.
func TestBreakerLogged(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(ruleFile, 1000))
	r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(), Timeout: 20 * time.Millisecond})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.decide(t, "ip", "10.0.0.1")
			time.Sleep(5 * time.Millisecond)
		}
	}()
	if err := redis.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	time.Sleep(3 * time.Second)
	if err := redis.Resume(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the breaker closed", func() bool { return r.resilient.BreakerState() == "closed" })
	time.Sleep(1500 * time.Millisecond) // a line held back by the throttle
	close(stop)
	<-done
	var lines []string
	for _, l := range strings.Split(r.logs.String(), "\n") {
		if strings.Contains(l, "circuit breaker") {
			lines = append(lines, l)
		}
	}
	t.Logf("%s", strings.Join(lines, "\n"))
	// An open line, a closed line, and at most one a second in all (the
	// breaker may open again after the outage, on a busy host).
	if max := int(time.Since(paused)/time.Second) + 1; len(lines) < 2 || len(lines) > max {
		t.Fatalf("%d breaker lines, want 2 to %d", len(lines), max)
	}
	if !regexp.MustCompile(`open.* cause=\S`).MatchString(lines[0]) {
		t.Errorf("the first line does not say the breaker opened, and why: %s", lines[0])
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "breaker closed") }) {
		t.Errorf("no line says the breaker closed")
	}
}

// TestBreakerLogFlapping: a breaker that flaps between closed and open
// many times a second logs a line a second at most, and the state it
// ends in is logged once the second is up.
func TestBreakerLogFlapping(t *testing.T) {
	t.Parallel()
	for _, end := range []string{"open", "closed"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			logs := &syncBuffer{}
			b := &breakerLog{log: slog.New(slog.NewTextHandler(logs, nil))}
			start := time.Now()
			for range 200 {
				b.changed("closed", "open", errors.New("boom"))
				b.changed("open", "half-open", nil)
				b.changed("half-open", "open", errors.New("probe failed"))
				b.changed("open", "half-open", nil)
				b.changed("half-open", "closed", nil)
			}
			if end == "open" {
				b.changed("closed", "open", errors.New("boom"))
			}
			elapsed := time.Since(start)
			time.Sleep(1200 * time.Millisecond)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if max := int(elapsed/time.Second) + 2; len(lines) > max {
				t.Fatalf("%d lines in %v, want at most %d:\n%s", len(lines), elapsed, max, logs)
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, "breaker "+end) {
				t.Fatalf("the last line does not say the breaker is %s:\n%s", end, logs)
			}
		})
	}
}
