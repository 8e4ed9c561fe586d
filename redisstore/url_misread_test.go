package redisstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/redlimit/redlimit/redisstore"
)

// TestURLMisreadHosts: ParseURL refuses, with an error that says why, the
// URLs that rueidis would read as something else than they say: an IPv6
// address without brackets (rueidis dials "::1:6379" as [::1:6379]:6379, a
// host that is not ::1) in the host or an addr, and a query that does not
// parse (url.Query drops the pair that fails, so "master_set=my%zz"
// connects to the sentinel as if it were Redis); and the error about a URL
// without "//" says so instead of blaming an "@" it does not hold.
func TestURLMisreadHosts(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"redis://::1:6379":                         "bracket",
		"redis://[::1]:6379?addr=::1:7001":         "bracket",
		"redis://127.0.0.1:6379?master_set=my%zzm": "query",
		"redis://127.0.0.1:6379?addr=a;b":          "query",
		"redis:127.0.0.1:6379":                     "//",
	} {
		copt, err := redisstore.ParseURL(url)
		if err == nil {
			t.Errorf("ParseURL(%q): no error; dials %v, master set %q", url, copt.InitAddress, copt.Sentinel.MasterSet)
			continue
		}
		if !errors.Is(err, redisstore.ErrConnect) || !strings.Contains(err.Error(), want) || strings.Contains(url, "@") != strings.Contains(err.Error(), " @ ") {
			t.Errorf("ParseURL(%q): %v; want an error about %q", url, err, want)
		}
	}
	// What they mean, written right, parses.
	for _, url := range []string{"redis://[::1]:6379", "redis://[::1]:6379?addr=[::1]:7001", "redis://127.0.0.1:6379?master_set=my%25zzm", "redis://[::1]", "redis://h?addr=h2"} {
		if _, err := redisstore.ParseURL(url); err != nil {
			t.Errorf("ParseURL(%q): %v", url, err)
		}
	}
}
