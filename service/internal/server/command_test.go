package server

import (
	"flag"
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	addr := fs.String("grpc-addr", "a", "")
	timeout := fs.Duration("timeout", time.Second, "")
	shadow := fs.Bool("shadow", false, "")
	env := map[string]string{"REDLIMIT_GRPC_ADDR": "b", "REDLIMIT_TIMEOUT": "5ms", "REDLIMIT_SHADOW": "true"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	if err := fromEnv(fs, lookup); err != nil {
		t.Fatal(err)
	}
	if *addr != "b" || *timeout != 5*time.Millisecond || !*shadow {
		t.Fatalf("from the environment: %q %s %v", *addr, *timeout, *shadow)
	}
	// A flag on the command line wins.
	if err := fs.Parse([]string{"--grpc-addr=c"}); err != nil || *addr != "c" {
		t.Fatalf("flag over env: %q %v", *addr, err)
	}
	env["REDLIMIT_TIMEOUT"] = "soon"
	if err := fromEnv(fs, lookup); err == nil || !strings.Contains(err.Error(), "REDLIMIT_TIMEOUT=\"soon\"") {
		t.Fatalf("a bad value: %v", err)
	}
}
