package config

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/redlimit/redlimit"
)

// TestLoaderDefaultAlgorithm: Loader.DefaultAlgorithm counts the limits
// whose file and rule name no algorithm; a named one stays.
func TestLoaderDefaultAlgorithm(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{
		"plain.yaml": "domain: plain\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n",
		"named.yaml": "domain: named\nalgorithm: token_bucket\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 5}\n" +
			"  - key: j\n    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding_log}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		def                    redlimit.Algorithm
		plain, named, namedLim redlimit.Algorithm
	}{
		{0, redlimit.SlidingWindow, redlimit.TokenBucket, redlimit.SlidingLog},
		{redlimit.FixedWindow, redlimit.FixedWindow, redlimit.TokenBucket, redlimit.SlidingLog},
	} {
		c, err := Loader{DefaultAlgorithm: tc.def}.Load(context.Background(), dir)
		if err != nil {
			t.Fatal(err)
		}
		got := []redlimit.Algorithm{c.Domains["plain"].Rules()[0].Limit.Algorithm, c.Domains["named"].Rules()[0].Limit.Algorithm, c.Domains["named"].Rules()[1].Limit.Algorithm}
		want := []redlimit.Algorithm{tc.plain, tc.named, tc.namedLim}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("default %v: rule %d counts with %v; want %v", tc.def, i, got[i], want[i])
			}
		}
	}
}
