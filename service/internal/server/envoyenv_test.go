package server

import (
	"errors"
	"flag"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// TestEnvoyEnv: envoyproxy/ratelimit's variables become serve's flag
// values, read as it reads them; values that cannot work are errors.
func TestEnvoyEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		env     map[string]string
		ratelim bool
		want    map[string]string // flag → value; nil with wantErr
		wantErr string
	}{
		{name: "nothing set", env: nil, want: map[string]string{}},
		{name: "port alone takes envoy's host", env: map[string]string{"PORT": "9000"},
			want: map[string]string{"http-addr": "0.0.0.0:9000"}},
		{name: "listeners", env: map[string]string{"HOST": "127.0.0.1", "GRPC_HOST": "::1", "GRPC_PORT": "0", "GRPC_MAX_CONNECTION_AGE": "1h"},
			want: map[string]string{"http-addr": "127.0.0.1:8080", "grpc-addr": "[::1]:0", "grpc-max-connection-age": "1h"}},
		{name: "grpc uds wins", env: map[string]string{"GRPC_UDS": "/run/rl.sock", "GRPC_PORT": "1"},
			want: map[string]string{"grpc-addr": "unix:/run/rl.sock"}},
		{name: "as ratelimit, envoy's defaults", ratelim: true, env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379"},
			want: map[string]string{"http-addr": "0.0.0.0:8080", "grpc-addr": "0.0.0.0:8081", "log-level": "warn",
				"config": "/srv/runtime_data/current/config", "redis": "redis://redis:6379", "deny-cache": "false"}},
		{name: "as ratelimit, nutcracker's socket", ratelim: true, env: map[string]string{"HOST": "h", "GRPC_HOST": "g", "RUNTIME_ROOT": "/r", "LOG_LEVEL": "debug", "LOCAL_CACHE_SIZE_IN_BYTES": "1000"},
			want: map[string]string{"http-addr": "h:8080", "grpc-addr": "g:8081", "log-level": "debug",
				"config": "/r/config", "redis": "unix:///var/run/nutcracker/ratelimit.sock", "deny-cache-bytes": "1000"}},
		{name: "runtime layout", env: map[string]string{"RUNTIME_ROOT": "/srv/rt/current", "RUNTIME_SUBDIRECTORY": "ratelimit", "MERGE_DOMAIN_CONFIG": "true"},
			want: map[string]string{"config": "/srv/rt/current/ratelimit/config", "merge-domains": "true"}},
		{name: "redis single with ACL user", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "127.0.0.1:6379", "REDIS_AUTH": "rl:p@ss:w", "REDIS_TIMEOUT": "30ms", "CACHE_KEY_PREFIX": "x:"},
			want: map[string]string{"redis": "redis://rl:p%40ss%3Aw@127.0.0.1:6379", "timeout": "30ms", "redis-prefix": "x:"}},
		{name: "redis password only, TLS", env: map[string]string{"REDIS_SOCKET_TYPE": "TCP", "REDIS_URL": "r:6380", "REDIS_AUTH": "secret", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca.pem"},
			want: map[string]string{"redis": "rediss://:secret@r:6380?ca_file=%2Fca.pem"}},
		{name: "redis sentinel", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster,s1:26379,s2:26379"},
			want: map[string]string{"redis": "redis://s1:26379?addr=s2%3A26379&master_set=mymaster"}},
		{name: "redis cluster", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "CLUSTER", "REDIS_URL": "c1:7000,c2:7001"},
			want: map[string]string{"redis": "redis://c1:7000?addr=c2%3A7001"}},
		{name: "behaviour", env: map[string]string{"SHADOW_MODE": "true", "QUOTA_MODE": "false", "RESPONSE_DYNAMIC_METADATA": "1",
			"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_LIMIT_HEADER": "X-Limit", "LIMIT_RESET_HEADER": "RateLimit-Reset", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"},
			want: map[string]string{"shadow": "true", "quota-mode": "false", "response-dynamic-metadata": "true",
				"response-headers": "envoy", "response-header-names": "RateLimit-Limit=X-Limit", "counting": "admission"}},
		{name: "header names without headers", env: map[string]string{"LIMIT_LIMIT_HEADER": "X-Limit"}, want: map[string]string{}},
		{name: "tls", env: map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k",
			"GRPC_CLIENT_TLS_CACERT": "/ca", "GRPC_CLIENT_TLS_SAN": "envoy"},
			want: map[string]string{"tls-cert-file": "/c", "tls-key-file": "/k", "http-tls": "off", "tls-client-ca-file": "/ca", "tls-client-san": "envoy"}},
		{name: "tls files without tls", env: map[string]string{"GRPC_SERVER_TLS_CERT": "/c"}, want: map[string]string{}},
		{name: "logs", env: map[string]string{"LOG_LEVEL": "WARNING", "LOG_FORMAT": "JSON"}, want: map[string]string{"log-level": "warn", "log-format": "json"}},
		{name: "tracing", env: map[string]string{"TRACING_ENABLED": "true"}, want: map[string]string{"tracing": "true"}},
		{name: "metrics and xDS left to their readers", env: map[string]string{"USE_PROMETHEUS": "true", "CONFIG_TYPE": "GRPC_XDS_SOTW", "NEAR_LIMIT_RATIO": "0.9"},
			want: map[string]string{}},

		{name: "memcache", env: map[string]string{"BACKEND_TYPE": "memcache"}, wantErr: "BACKEND_TYPE"},
		{name: "redis url without a port", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.local"}, wantErr: "host:port"},
		{name: "redis url not a URL", env: map[string]string{"REDIS_URL": "redis://a b:1"}, wantErr: "REDIS_URL"},
		{name: "unix sentinel", env: map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "/s.sock"}, wantErr: "REDIS_SOCKET_TYPE=unix"},
		{name: "sentinel without sentinels", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_TYPE": "sentinel", "REDIS_URL": "m"}, wantErr: "sentinel"},
		{name: "unknown socket type", env: map[string]string{"REDIS_SOCKET_TYPE": "udp", "REDIS_URL": "a:1"}, wantErr: "REDIS_SOCKET_TYPE"},
		{name: "bad boolean", env: map[string]string{"SHADOW_MODE": "yes please"}, wantErr: "SHADOW_MODE"},
		{name: "tls without files", env: map[string]string{"GRPC_SERVER_USE_TLS": "true"}, wantErr: "GRPC_SERVER_TLS_CERT"},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: "LOG_LEVEL"},
		{name: "bad local cache", env: map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "-1"}, wantErr: "LOCAL_CACHE_SIZE_IN_BYTES"},
		{name: "skip hostname verification", env: map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "a:1", "REDIS_TLS": "true", "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION": "true"}, wantErr: "skip_verify"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			flags, _, _, err := envoyEnv(mapLookup(tc.env), tc.ratelim)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrEnvoyEnv) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want ErrEnvoyEnv naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, f := range flags {
				got[f.flag] = f.value
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("flags %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestEnvoyEnvNotes: a set variable redlimit has no use for is named once,
// with what redlimit does instead; those of the metrics and xDS are not.
func TestEnvoyEnvNotes(t *testing.T) {
	t.Parallel()
	_, _, notes, err := envoyEnv(mapLookup(map[string]string{"REDIS_POOL_SIZE": "10", "REDIS_PERSECOND_URL": "x", "EXPIRATION_JITTER_MAX_SECONDS": "300",
		"MEMCACHE_HOST_PORT": "m:11211", "USE_STATSD": "true", "NEAR_LIMIT_RATIO": "0.8"}), false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range notes {
		if n.instead == "" {
			t.Errorf("%s: no word on what redlimit does instead", n.name)
		}
		names = append(names, n.name)
	}
	if got, want := strings.Join(names, " "), "REDIS_POOL_SIZE REDIS_PERSECOND_URL EXPIRATION_JITTER_MAX_SECONDS MEMCACHE_HOST_PORT"; got != want {
		t.Errorf("notes %q; want %q", got, want)
	}
}

// TestEnvoyEnvFlagsExist: every flag the table names is one of serve's,
// and each mapped value parses as its flag.
func TestEnvoyEnvFlagsExist(t *testing.T) {
	t.Parallel()
	fs := serveFlags(t)
	for _, v := range envoyVars {
		for _, f := range v.flags {
			if fs.Lookup(f) == nil {
				t.Errorf("%s maps to --%s, which serve does not have", v.name, f)
			}
		}
		if (len(v.flags) == 0) == (v.unused == "") {
			t.Errorf("%s: give flags or what redlimit does instead, not both", v.name)
		}
	}
}

// TestCompatEnvoy: --compat=envoy makes fixed windows the default, counts
// every hit, and turns the deny cache off, unless those flags were given.
func TestCompatEnvoy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		counting config.Counting
		noDeny   bool
	}{
		{nil, config.CountingDebit, true},
		{[]string{"--counting=admission"}, config.CountingAdmission, true},
		{[]string{"--deny-cache-bytes=4096"}, config.CountingDebit, false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		o := Options{Counting: config.CountingAuto}
		fs.TextVar(&o.Counting, "counting", config.CountingAuto, "")
		fs.Bool("deny-cache", true, "")
		fs.IntVar(&o.DenyCacheBytes, "deny-cache-bytes", 1, "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if err := applyCompat(fs, CompatEnvoy, &o); err != nil {
			t.Fatal(err)
		}
		if o.DefaultAlgorithm != redlimit.FixedWindow || o.Counting != tc.counting || o.NoDenyCache != tc.noDeny {
			t.Errorf("%v: algorithm %v counting %v no deny cache %v", tc.args, o.DefaultAlgorithm, o.Counting, o.NoDenyCache)
		}
	}
	if err := applyCompat(flag.NewFlagSet("t", flag.ContinueOnError), "envoyproxy", &Options{}); err == nil {
		t.Error("--compat=envoyproxy: no error")
	}
}

func mapLookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

// serveFlags returns serve's flag set, as --help lists it.
func serveFlags(t *testing.T) *flag.FlagSet {
	t.Helper()
	var out strings.Builder
	if code := Main([]string{"--help"}, &out, io.Discard); code != 0 {
		t.Fatalf("--help: exit %d", code)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	for _, line := range strings.Split(out.String(), "\n") {
		if name, ok := strings.CutPrefix(line, "  --"); ok {
			fs.String(strings.Fields(name)[0], "", "")
		}
	}
	return fs
}

// TestMigratingTable: docs/MIGRATING.md's table names every setting of
// envoyVars once, with the flags it sets; none more.
func TestMigratingTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../../docs/MIGRATING.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
			continue
		}
		name := strings.Trim(strings.TrimPrefix(cells[0], "| "), "`")
		if _, dup := rows[name]; dup {
			t.Errorf("%s: two rows", name)
		}
		var flags []string
		for _, f := range strings.Split(cells[1], ", ") {
			if f = strings.Trim(f, "`"); strings.HasPrefix(f, "--") {
				flags = append(flags, strings.TrimPrefix(f, "--"))
			}
		}
		rows[name] = flags
	}
	// The flags each variable sets: envoyVars, and statsVars for the
	// metrics and the xDS config source.
	want := map[string][]string{}
	for _, v := range envoyVars {
		want[v.name] = append([]string(nil), v.flags...)
	}
	for _, v := range statsVars {
		if !slices.Contains(want[v.env], v.flag) {
			want[v.env] = append(want[v.env], v.flag)
		}
	}
	for name, wflags := range want {
		flags, ok := rows[name]
		if !ok {
			t.Errorf("%s: no row in docs/MIGRATING.md", name)
			continue
		}
		if !slices.Equal(flags, wflags) {
			t.Errorf("%s: the doc says %v, the code sets %v", name, flags, wflags)
		}
		delete(rows, name)
	}
	for name := range rows {
		t.Errorf("%s: a row in docs/MIGRATING.md the code does not read", name)
	}
}
