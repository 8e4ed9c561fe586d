package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/redisstore"
)

// Finding 14: a Redis URL that does not parse was printed whole in the
// error, password and all (url.Parse quotes its input); so was one whose
// password holds a character that ends the user information (/, #, ?),
// which splits the password into the port and the path. No error of
// ParseURL or Open, and no Redacted form, holds any part of the password,
// whatever the URL.
func TestURLErrorsHideThePassword(t *testing.T) {
	t.Parallel()
	const secret = "Zq9sekret"
	for _, url := range []string{
		"redis://:" + secret + "%zz@127.0.0.1:1",     // a bad escape
		"redis://:s3cr%et" + secret + "@127.0.0.1:1", // the finding's
		"redis://default:Zq9/sekret@127.0.0.1:1",     // "/" ends the authority: port "Zq9"
		"redis://u:12/" + secret + "@127.0.0.1:1",    // parses: port 12, path "/Zq9sekret@..."
		"redis://:" + secret + "#frag@127.0.0.1:1",   // "#" ends it
		"redis://:" + secret + "?x@127.0.0.1:1",      // "?" ends it
		"redis://:" + secret + " x@127.0.0.1:1",      // a space
		"redis://:" + secret + "@[::1",               // an unclosed bracket
		"redis:" + secret + "@127.0.0.1:1",           // no "//": an opaque URL
		"user:" + secret + "@127.0.0.1:1",            // no scheme
		secret + "@127.0.0.1:1",                      // no scheme, no colon
		"redis://:" + secret + "@127.0.0.1:1/x",      // a bad database
		"redis://:" + secret + "@127.0.0.1:1?dial_timeout=soon",
		"mysql://:" + secret + "@127.0.0.1:1",      // a scheme rueidis does not take
		"redis://:" + secret + "@127.0.0.1:1",      // well formed: refused connection
		"redis://us@er:" + secret + "@127.0.0.1:1", // "@" in the user name
		"rediss://:" + secret + "@127.0.0.1:1?ca_file=/nonexistent",
	} {
		parts := []string{secret, "Zq9", "sekret", "s3cr"}
		leaks := func(s string) bool {
			for _, p := range parts {
				if strings.Contains(s, p) {
					return true
				}
			}
			return false
		}
		if r := redisstore.Redacted(url); leaks(r) {
			t.Errorf("Redacted(%q) = %q", url, r)
		}
		if _, err := redisstore.ParseURL(url); err != nil && (leaks(err.Error()) || !errors.Is(err, redisstore.ErrConnect)) {
			t.Errorf("ParseURL(%q): %v", url, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := redisstore.Open(ctx, url)
		cancel()
		if err == nil {
			s.Close()
			t.Errorf("Open(%q): no error", url)
			continue
		}
		if leaks(err.Error()) || !errors.Is(err, redisstore.ErrConnect) {
			t.Errorf("Open(%q): %v", url, err)
		}
	}
}

// A password with characters reserved in URLs is refused with a hint, and
// works percent-encoded; the redacted form keeps everything but the
// password.
func TestURLPasswordHint(t *testing.T) {
	t.Parallel()
	_, err := redisstore.ParseURL("redis://:pa/ss@127.0.0.1:6379")
	if err == nil || !strings.Contains(err.Error(), "percent-encode") {
		t.Fatalf("a password with /: %v", err)
	}
	if _, err := redisstore.ParseURL("redis://:pa%2Fss@127.0.0.1:6379"); err != nil {
		t.Fatalf("the same, encoded: %v", err)
	}
	for url, want := range map[string]string{
		"redis://:pa%2Fss@127.0.0.1:6379/2?addr=127.0.0.1:7000": "redis://:xxxxx@127.0.0.1:6379/2?addr=127.0.0.1:7000",
		"redis://alice:pw@127.0.0.1:6379":                       "redis://alice:xxxxx@127.0.0.1:6379",
		"redis://alice@127.0.0.1:6379":                          "redis://alice@127.0.0.1:6379",
		"redis://127.0.0.1:6379":                                "redis://127.0.0.1:6379",
		"rediss://h:6380?ca_file=/etc/ca.pem":                   "rediss://h:6380?ca_file=/etc/ca.pem",
	} {
		if got := redisstore.Redacted(url); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", url, got, want)
		}
	}
}
