package server

import (
	"fmt"
	"path/filepath"
	"regexp"
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
	// An open line, a closed line, and a few more at most for a breaker
	// that flapped: one a second.
	if len(lines) < 2 || len(lines) > 6 {
		t.Fatalf("%d breaker lines, want 2 to 6:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	if !regexp.MustCompile(`open.* cause=\S`).MatchString(lines[0]) {
		t.Errorf("the first line does not say the breaker opened, and why: %s", lines[0])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "closed") {
		t.Errorf("the last line does not say the breaker closed: %s", last)
	}
}
