package server

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// swapLink points link at target as a release switch does: a new link
// renamed over the old one (ln -sfn target tmp && mv -T tmp link).
func swapLink(t *testing.T, target, link string) {
	t.Helper()
	tmp := link + ".tmp"
	mustSymlink(t, target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

// TestHotReloadSwappedLink: --config names, or goes through, a link to a
// directory swapped atomically; every swap reloads, before and after a
// reload asked as SIGHUP does.
func TestHotReloadSwappedLink(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, rel string }{
		{"link to the directory", "current"},
		{"file through the link", filepath.Join("current", "rules.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			release := func(n int) {
				t.Helper()
				d := filepath.Join(dir, fmt.Sprintf("release%d", n))
				mustMkdir(t, d)
				writeFile(t, filepath.Join(d, "rules.yaml"), fmt.Sprintf(ruleFile, n))
			}
			release(1)
			mustSymlink(t, "release1", filepath.Join(dir, "current"))
			r := start(t, Options{ConfigPath: filepath.Join(dir, tc.rel)})
			limit := func() uint32 {
				return r.decide(t, "ip", fmt.Sprint(time.Now().UnixNano())).Statuses[0].CurrentLimit.GetRequestsPerUnit()
			}
			if got := limit(); got != 1 {
				t.Fatalf("limit %d at start", got)
			}
			for n := 2; n <= 7; n++ {
				if n == 5 {
					if err := r.Reload(); err != nil { // as SIGHUP does
						t.Fatal(err)
					}
				}
				release(n)
				swapLink(t, fmt.Sprintf("release%d", n), filepath.Join(dir, "current"))
				waitFor(t, fmt.Sprintf("limit %d after swap %d", n, n-1), func() bool { return limit() == uint32(n) })
			}
		})
	}
}
