package server

import (
	"flag"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestEnvoyStatsEnv checks that envoyproxy/ratelimit's variables of
// metrics and xDS set the flags they mean, and that bad values are
// refused naming the variable.
func TestEnvoyStatsEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    func(o *Options)
		wantErr string
	}{
		{name: "nothing set", env: nil, want: func(*Options) {}},
		{name: "prometheus defaults", env: map[string]string{"USE_PROMETHEUS": "true"}, want: func(o *Options) {
			o.EnvoyMetrics, o.PrometheusAddr, o.PrometheusPath = true, ":9090", "/metrics"
		}},
		{name: "prometheus", env: map[string]string{"USE_PROMETHEUS": "TRUE", "PROMETHEUS_ADDR": "127.0.0.1:9191", "PROMETHEUS_PATH": "/m", "NEAR_LIMIT_RATIO": "0.9"}, want: func(o *Options) {
			o.EnvoyMetrics, o.PrometheusAddr, o.PrometheusPath, o.NearLimitRatio = true, "127.0.0.1:9191", "/m", 0.9
		}},
		{name: "prometheus off", env: map[string]string{"USE_PROMETHEUS": "false", "PROMETHEUS_ADDR": ":1"}, want: func(*Options) {}},
		{name: "statsd", env: map[string]string{"USE_STATSD": "true", "STATSD_HOST": "statsd.local", "STATSD_PORT": "9125", "EXTRA_TAGS": "env:prod,zone:a", "STATS_FLUSH_INTERVAL": "5s"}, want: func(o *Options) {
			o.StatsdAddr, o.StatsdTags, o.StatsFlushInterval = "statsd.local:9125", map[string]string{"env": "prod", "zone": "a"}, 5*time.Second
		}},
		{name: "statsd by its host", env: map[string]string{"STATSD_HOST": "10.0.0.5"}, want: func(o *Options) { o.StatsdAddr = "10.0.0.5:8125" }},
		{name: "statsd off", env: map[string]string{"USE_STATSD": "false", "STATSD_HOST": "10.0.0.5"}, want: func(*Options) {}},
		{name: "xds", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "cp:18000", "CONFIG_GRPC_XDS_NODE_ID": "n1",
			"CONFIG_GRPC_XDS_NODE_METADATA": "a=1,b=2", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-k:v",
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/ca", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/c",
			"CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/k", "CONFIG_GRPC_XDS_SERVER_TLS_SAN": "cp.local",
			"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "2s", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "20s", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "1000000"},
			want: func(o *Options) {
				o.XDS = XDSOptions{ServerURL: "cp:18000", NodeID: "n1", NodeMetadata: map[string]string{"a": "1", "b": "2"}, Headers: map[string]string{"x-k": "v"},
					TLS: true, CAFile: "/ca", CertFile: "/c", KeyFile: "/k", ServerName: "cp.local",
					MinBackoff: 2 * time.Second, MaxBackoff: 20 * time.Second, MaxMessageBytes: 1000000}
			}},
		{name: "xds default url", env: map[string]string{"CONFIG_TYPE": "grpc_xds_sotw"}, want: func(o *Options) { o.XDS.ServerURL = "localhost:18000" }},
		{name: "file", env: map[string]string{"CONFIG_TYPE": "FILE", "CONFIG_GRPC_XDS_SERVER_URL": "cp:1"}, want: func(*Options) {}},
		{name: "bad config type", env: map[string]string{"CONFIG_TYPE": "GRPC_XDS_DELTA"}, wantErr: "CONFIG_TYPE"},
		{name: "bad bool", env: map[string]string{"USE_PROMETHEUS": "yes please"}, wantErr: "USE_PROMETHEUS"},
		{name: "bad port", env: map[string]string{"USE_STATSD": "true", "STATSD_PORT": "eighty"}, wantErr: "STATSD_PORT"},
		{name: "bad tags", env: map[string]string{"USE_STATSD": "true", "EXTRA_TAGS": "novalue"}, wantErr: "EXTRA_TAGS"},
		{name: "bad interval", env: map[string]string{"USE_STATSD": "true", "STATS_FLUSH_INTERVAL": "10"}, wantErr: "STATS_FLUSH_INTERVAL"},
		{name: "bad ratio", env: map[string]string{"NEAR_LIMIT_RATIO": "2"}, wantErr: "NEAR_LIMIT_RATIO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got, want Options
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			registerEnvoyStatsFlags(fs, &got)
			defaults := got
			defaults.StatsdTags, defaults.XDS.NodeMetadata, defaults.XDS.Headers = maps.Clone(got.StatsdTags), maps.Clone(got.XDS.NodeMetadata), maps.Clone(got.XDS.Headers)
			err := setEnvoyStatsEnv(fs, func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want = defaults
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("options\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}
