package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ratelimit/v3" // for the Any types of the examples
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	redlimitprom "github.com/redlimit/redlimit/prometheus"
	"github.com/redlimit/redlimit/service/internal/server"
)

const operations = "../../docs/OPERATIONS.md"

// yamlBlocks returns the ```yaml blocks of the Markdown file name, decoded.
func yamlBlocks(t *testing.T, name string) []any {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []any
	for _, part := range strings.Split(string(data), "```yaml\n")[1:] {
		text, _, ok := strings.Cut(part, "```")
		if !ok {
			t.Fatalf("%s: a yaml block does not end", name)
		}
		var v any
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%s: a yaml block does not parse: %v\n%s", name, err, text)
		}
		blocks = append(blocks, v)
	}
	return blocks
}

// checkProto decodes v, as Envoy would its YAML, into m, and validates it
// with the rules of Envoy's API (required fields, ranges) unless partial.
func checkProto(t *testing.T, what string, v any, m proto.Message, partial bool) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		t.Errorf("%s is not a valid %T: %v\n%s", what, m, err, b)
		return
	}
	if v, ok := m.(interface{ ValidateAll() error }); ok && !partial {
		if err := v.ValidateAll(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// TestOperationsEnvoyExamples decodes every Envoy configuration that
// docs/OPERATIONS.md shows (the bootstrap cluster, the filters and routes,
// the values of the Envoy Gateway and Istio patches, the TLS and Unix socket
// clusters and the SDS file of a secret) into Envoy's own API
// types, so that a misspelt field or a wrong type fails here, not in a
// reader's proxy.
func TestOperationsEnvoyExamples(t *testing.T) {
	var clusters, filters, routes, rateLimits, secrets int
	cluster := func(what string, v any) {
		checkProto(t, what, v, &clusterv3.Cluster{}, false)
		clusters++
	}
	filter := func(what string, v any) {
		checkProto(t, what, v, &hcmv3.HttpFilter{}, false)
		filters++
	}
	for i, b := range yamlBlocks(t, operations) {
		what := fmt.Sprintf("yaml block %d", i)
		for j, c := range asList(get(b, "static_resources", "clusters")) {
			cluster(fmt.Sprintf("%s, cluster %d", what, j), c)
		}
		for j, f := range asList(get(b, "http_filters")) {
			filter(fmt.Sprintf("%s, filter %d", what, j), f)
		}
		for j, r := range asList(get(b, "resources")) { // an SDS file of secrets
			var a anypb.Any
			checkProto(t, fmt.Sprintf("%s, resource %d", what, j), r, &a, true)
			var sec tlsv3.Secret
			if err := a.UnmarshalTo(&sec); err != nil {
				t.Errorf("%s, resource %d: %v", what, j, err)
			} else if err := sec.ValidateAll(); err != nil {
				t.Errorf("%s, resource %d: %v", what, j, err)
			}
			secrets++
		}
		for j, r := range asList(get(b, "routes")) {
			checkProto(t, fmt.Sprintf("%s, route %d", what, j), r, &routev3.Route{}, false)
			routes++
		}
		switch get(b, "kind") {
		case "EnvoyPatchPolicy":
			for j, p := range asList(get(b, "spec", "jsonPatches")) {
				what := fmt.Sprintf("EnvoyPatchPolicy patch %d", j)
				value := get(p, "operation", "value")
				switch get(p, "type") {
				case "type.googleapis.com/envoy.config.cluster.v3.Cluster":
					cluster(what, value)
				case "type.googleapis.com/envoy.config.listener.v3.Listener":
					filter(what, value)
				case "type.googleapis.com/envoy.config.route.v3.RouteConfiguration":
					for k, r := range asList(value) {
						checkProto(t, fmt.Sprintf("%s, rate limit %d", what, k), r, &routev3.RateLimit{}, false)
						rateLimits++
					}
				default:
					t.Errorf("%s: type %v", what, get(p, "type"))
				}
			}
		case "EnvoyFilter":
			for j, p := range asList(get(b, "spec", "configPatches")) {
				what := fmt.Sprintf("EnvoyFilter patch %d", j)
				switch get(p, "applyTo") {
				case "HTTP_FILTER":
					filter(what, get(p, "patch", "value"))
				case "VIRTUAL_HOST": // merged into Istio's: partial
					checkProto(t, what, get(p, "patch", "value"), &routev3.VirtualHost{}, true)
					rateLimits += len(asList(get(p, "patch", "value", "rate_limits")))
				default:
					t.Errorf("%s: applyTo %v", what, get(p, "applyTo"))
				}
			}
		}
	}
	// Bootstrap, mutual TLS, Unix socket, Envoy Gateway: a cluster each;
	// filters: bootstrap (2), Envoy Gateway, Istio; the SDS file's secret.
	if clusters != 4 || filters != 4 || routes != 2 || rateLimits != 2 || secrets != 1 {
		t.Errorf("checked %d clusters, %d filters, %d routes, %d rate_limits and %d secrets: the examples changed, update the test",
			clusters, filters, routes, rateLimits, secrets)
	}
}

// TestOperationsMetricNames checks that every redlimit_ metric that
// docs/OPERATIONS.md names is one the service exports.
func TestOperationsMetricNames(t *testing.T) {
	reg := &describing{}
	if _, err := server.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := redlimitprom.New(reg, redlimitprom.Options{}); err != nil { // the service's with Redis
		t.Fatal(err)
	}
	exported := reg.names
	data, err := os.ReadFile(operations)
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`redlimit_[a-z_]+`).FindAllString(string(data), -1)
	if len(named) < 10 {
		t.Fatalf("only %d metric names in %s", len(named), operations)
	}
	for _, name := range named {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			base = strings.TrimSuffix(base, suffix)
		}
		if !slices.Contains(exported, base) {
			t.Errorf("%s names %s, which the service does not export", operations, name)
		}
	}
}

// describing is a prometheus.Registerer that records the names of the
// metrics registered on it, series or not.
type describing struct{ names []string }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names = append(d.names, m[1])
		}
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		d.Register(c)
	}
}

func (d *describing) Unregister(prometheus.Collector) bool { return false }

// TestSecurityNetworkPolicy checks that the NetworkPolicy docs/SECURITY.md
// shows is the one service/deploy/kubernetes ships.
func TestSecurityNetworkPolicy(t *testing.T) {
	var shown []any
	for _, b := range yamlBlocks(t, "../../docs/SECURITY.md") {
		if get(b, "kind") == "NetworkPolicy" {
			shown = append(shown, b)
		}
	}
	if len(shown) != 1 {
		t.Fatalf("docs/SECURITY.md shows %d NetworkPolicies, want 1", len(shown))
	}
	shipped := only(t, kustomized(t), "NetworkPolicy")
	if got, want := get(shown[0], "spec"), get(shipped, "spec"); !reflect.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("docs/SECURITY.md's NetworkPolicy differs from the shipped one:\nshown:\n%s\nshipped:\n%s", g, w)
	}
}
