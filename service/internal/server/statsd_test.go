package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// statsdBackend is a statsd backend that appends the counters of every
// flush, as a JSON object, to the file its config names.
const statsdBackend = `const fs = require('fs');
exports.init = function (startup, config, events) {
  events.on('flush', function (ts, metrics) {
    fs.appendFileSync(config.countersFile, JSON.stringify(metrics.counters) + "\n");
  });
  return true;
};
`

// statsdServer is the statsd daemon (npm's statsd) on a TCP port of
// 127.0.0.1, with a backend that writes what it flushes to a file.
type statsdServer struct {
	addr  string
	file  string
	mu    sync.Mutex
	read  int64            // bytes of file read
	total map[string]int64 // counters summed over every flush
}

// statsdScript returns the path of statsd's stats.js, or fails the test
// saying how to install it.
func statsdScript(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("REDLIMIT_STATSD_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(cache, "redlimit", "statsd")
	}
	script := filepath.Join(dir, "node_modules", "statsd", "stats.js")
	_, err := os.Stat(script)
	_, nodeErr := exec.LookPath("node")
	if err != nil || nodeErr != nil {
		t.Fatalf("the statsd daemon is needed (npm's statsd, run by node) at %s: install it with `bash scripts/ensure-statsd.sh` (make test does), or `npm install --prefix %s statsd`", script, dir)
	}
	return script
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startStatsd starts statsd listening on TCP port, flushing every 100 ms,
// and stops it when the test ends.
func startStatsd(t *testing.T, port int) *statsdServer {
	t.Helper()
	script := statsdScript(t)
	dir := t.TempDir()
	backend := filepath.Join(dir, "backend.js")
	writeFile(t, backend, statsdBackend)
	s := &statsdServer{addr: "127.0.0.1:" + strconv.Itoa(port), file: filepath.Join(dir, "counters.jsonl"), total: map[string]int64{}}
	cfg, _ := json.Marshal(map[string]any{
		"servers":       []any{map[string]any{"server": "./servers/tcp", "address": "127.0.0.1", "port": port}},
		"mgmt_address":  "127.0.0.1",
		"mgmt_port":     freePort(t),
		"flushInterval": 100,
		"backends":      []string{backend},
		"countersFile":  s.file,
	})
	conf := filepath.Join(dir, "config.js")
	writeFile(t, conf, string(cfg))
	cmd := exec.Command("node", script, conf)
	cmd.Dir = filepath.Dir(script)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("statsd output:\n%s", out.String())
		}
	})
	waitFor(t, "statsd listening", func() bool {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return s
}

// counter returns name's hits over every flush statsd made so far.
func (s *statsdServer) counter(t *testing.T, name string) int64 {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	f, err := os.Open(s.file)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(s.read, 0); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // a line not whole yet is read next time
		}
		s.read += int64(len(line))
		var counters map[string]float64
		if err := json.Unmarshal(line, &counters); err != nil {
			t.Fatalf("statsd backend line %q: %v", line, err)
		}
		for k, v := range counters {
			s.total[k] += int64(v)
		}
	}
	return s.total[name]
}

// TestStatsdCounters checks envoyproxy/ratelimit's counters under its
// statsd names, with its tags, on a real statsd server; hits made while
// statsd is away reach it once it is back.
func TestStatsdCounters(t *testing.T) {
	t.Parallel()
	statsdScript(t)
	port := freePort(t)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, envoyRules)
	r := start(t, Options{ConfigPath: path, StatsdAddr: fmt.Sprintf("127.0.0.1:%d", port),
		StatsdTags: map[string]string{"env": "test.1", "zone": "a"}, StatsFlushInterval: 50 * time.Millisecond})

	r.hits(t, 5, "ip", "10.0.0.1")
	r.hits(t, 4, "ip", "10.0.0.1")
	time.Sleep(150 * time.Millisecond) // flushes that fail: statsd is not there yet
	st := startStatsd(t, port)
	r.hits(t, 3, "ip", "10.0.0.1")
	r.hits(t, 1, "tenant", "acme", "user", "u1")
	r.hits(t, 2, "tenant", "acme", "user", "u1")
	r.hits(t, 2, "shadowed", "192.168.0.1")

	const tags = ".__env=test_1.__zone=a"
	want := map[string]int64{
		"ratelimit.service.rate_limit.web.ip.total_hits":                  12,
		"ratelimit.service.rate_limit.web.ip.within_limit":                9,
		"ratelimit.service.rate_limit.web.ip.near_limit":                  2,
		"ratelimit.service.rate_limit.web.ip.over_limit":                  2,
		"ratelimit.service.rate_limit.web.tenant_acme.user_u1.total_hits": 3,
		"ratelimit.service.rate_limit.web.tenant_acme.user_u1.over_limit": 1,
		"ratelimit.service.rate_limit.web.shadowed.shadow_mode":           1,
		"ratelimit.service.rate_limit.web.shadowed.over_limit":            1,
	}
	for name, n := range want {
		waitFor(t, name+tags, func() bool { return st.counter(t, name+tags) >= n })
		time.Sleep(250 * time.Millisecond) // two more flushes: nothing more may come
		if got := st.counter(t, name+tags); got != n {
			t.Errorf("%s: %d, want %d", name+tags, got, n)
		}
	}
}
