package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// jsonPatchAdd applies the "add" operations of an RFC 6902 patch to v, as
// kustomize applies a component's patch: a path of object keys and list
// indexes, "-" appending to a list, "~1" standing for "/".
func jsonPatchAdd(t *testing.T, v map[string]any, ops []map[string]any) {
	t.Helper()
	for _, op := range ops {
		path, _ := op["path"].(string)
		if op["op"] != "add" {
			t.Fatalf("%s: op %v; the test applies add only", path, op["op"])
		}
		steps := strings.Split(strings.TrimPrefix(path, "/"), "/")
		for i, s := range steps {
			steps[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
		}
		if _, err := addAt(v, steps, op["value"]); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// addAt adds value at the path steps below node, and returns the node (a
// list grows into a new slice).
func addAt(node any, steps []string, value any) (any, error) {
	s := steps[0]
	switch n := node.(type) {
	case map[string]any:
		if len(steps) == 1 {
			if _, ok := n[s]; ok {
				return nil, fmt.Errorf("%s exists already", s)
			}
			n[s] = value
			return n, nil
		}
		child, ok := n[s]
		if !ok {
			return nil, fmt.Errorf("no %s", s)
		}
		c, err := addAt(child, steps[1:], value)
		n[s] = c
		return n, err
	case []any:
		if len(steps) == 1 {
			if s != "-" {
				return nil, fmt.Errorf("the test appends to lists only (%s)", s)
			}
			return append(n, value), nil
		}
		i, err := strconv.Atoi(s)
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("no element %s", s)
		}
		c, err := addAt(n[i], steps[1:], value)
		n[i] = c
		return n, err
	}
	return nil, fmt.Errorf("%s: not an object or a list", s)
}

// withTLSComponent returns the objects of service/deploy/kubernetes with the
// component service/deploy/kubernetes/tls applied.
func withTLSComponent(t *testing.T) []object {
	t.Helper()
	data, err := os.ReadFile("kubernetes/tls/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var comp struct {
		Kind    string `yaml:"kind"`
		Patches []struct {
			Target struct{ Kind, Name string }
			Patch  string
		}
	}
	if err := yaml.Unmarshal(data, &comp); err != nil {
		t.Fatal(err)
	}
	if comp.Kind != "Component" || len(comp.Patches) != 1 {
		t.Fatalf("kubernetes/tls: kind %s, %d patches; want a Component of one patch", comp.Kind, len(comp.Patches))
	}
	var ops []map[string]any
	if err := yaml.Unmarshal([]byte(comp.Patches[0].Patch), &ops); err != nil {
		t.Fatal(err)
	}
	objs := kustomized(t)
	for _, o := range objs {
		if o.kind() == comp.Patches[0].Target.Kind && o.name() == comp.Patches[0].Target.Name {
			jsonPatchAdd(t, map[string]any(o), ops)
		}
	}
	return objs
}

// checkTLS checks that a Deployment mounts the TLS Secret secret whole and
// read-only, points the TLS flags into it, and has Prometheus scrape over
// HTTPS; the probes stay on the plain probe port (checkManifests).
func checkTLS(t *testing.T, objs []object, secret string, mutual bool) {
	t.Helper()
	checkManifests(t, objs)
	d := only(t, objs, "Deployment")
	spec := get(d, "spec", "template", "spec")
	c := get(spec, "containers", 0)
	var args []string
	for _, a := range asList(get(c, "args")) {
		args = append(args, a.(string))
	}
	want := []string{"--tls-cert-file=/etc/redlimit/tls/tls.crt", "--tls-key-file=/etc/redlimit/tls/tls.key", "--http-tls=on"}
	if mutual {
		want = append(want, "--tls-client-ca-file=/etc/redlimit/tls/ca.crt")
	}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("args %v: no %s", args, w)
		}
	}
	mounted := false
	for _, m := range asList(get(c, "volumeMounts")) {
		if get(m, "name") == "tls" && get(m, "mountPath") == "/etc/redlimit/tls" && get(m, "readOnly") == true && get(m, "subPath") == nil {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("no whole read-only mount of the tls volume at /etc/redlimit/tls: %v", get(c, "volumeMounts"))
	}
	found := false
	for _, v := range asList(get(spec, "volumes")) {
		if get(v, "name") == "tls" && get(v, "secret", "secretName") == secret {
			found = true
		}
	}
	if !found {
		t.Errorf("no volume tls of the Secret %s: %v", secret, get(spec, "volumes"))
	}
	if s := get(d, "spec", "template", "metadata", "annotations", "prometheus.io/scheme"); s != "https" {
		t.Errorf("prometheus.io/scheme %v, want https", s)
	}
}

// TestKubernetesTLSComponent checks service/deploy/kubernetes with its tls
// component.
func TestKubernetesTLSComponent(t *testing.T) {
	checkTLS(t, withTLSComponent(t), "redlimit-tls", true)
}

// TestHelmTemplateTLS checks the chart with TLS and tracing on: with
// tls.enabled and tls.clientAuth it renders service/deploy/kubernetes with its tls
// component; tracing adds --tracing and the OTEL_* variables; tls.http
// mtls needs tls.clientAuth; tls.http on or off in a values file (YAML
// 1.1 booleans) is the mode named.
func TestHelmTemplateTLS(t *testing.T) {
	objs := render(t, helm(t, "template", "redlimit", chart, "--namespace", "redlimit", "--set", "tls.enabled=true,tls.clientAuth=true"))
	checkTLS(t, objs, "redlimit-tls", true)
	got, want := normalize(only(t, objs, "Deployment")), normalize(only(t, withTLSComponent(t), "Deployment"))
	if !reflect.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("the chart with TLS differs from service/deploy/kubernetes with its tls component:\nrendered:\n%s\nkustomized:\n%s", g, w)
	}

	objs = render(t, helm(t, "template", "redlimit", chart, "--set",
		"tls.enabled=true,tls.secretName=rls-cert,tls.http=off,tracing.enabled=true,tracing.env.OTEL_EXPORTER_OTLP_ENDPOINT=http://otel:4318,tracing.env.OTEL_TRACES_SAMPLER_ARG=0.01"))
	checkManifests(t, objs)
	d := only(t, objs, "Deployment")
	c := get(d, "spec", "template", "spec", "containers", 0)
	args := asList(get(c, "args"))
	for _, w := range []string{"--tracing", "--http-tls=off", "--tls-cert-file=/etc/redlimit/tls/tls.crt"} {
		if !slices.Contains(args, any(w)) {
			t.Errorf("args %v: no %s", args, w)
		}
	}
	if slices.ContainsFunc(args, func(a any) bool { return strings.HasPrefix(a.(string), "--tls-client-ca-file") }) {
		t.Errorf("args %v: a client CA without tls.clientAuth", args)
	}
	env := map[any]any{}
	for _, e := range asList(get(c, "env")) {
		env[get(e, "name")] = get(e, "value")
	}
	if env["OTEL_EXPORTER_OTLP_ENDPOINT"] != "http://otel:4318" || env["OTEL_TRACES_SAMPLER_ARG"] != "0.01" {
		t.Errorf("env %v: want the tracing.env variables", env)
	}
	if s := get(c, "readinessProbe", "httpGet", "scheme"); s != nil {
		t.Errorf("plain HTTP, yet the probes' scheme is %v", s)
	}
	found := false
	for _, v := range asList(get(d, "spec", "template", "spec", "volumes")) {
		found = found || get(v, "secret", "secretName") == "rls-cert"
	}
	if !found {
		t.Errorf("tls.secretName rls-cert not mounted")
	}
	if out, err := helmErr(t, "template", "redlimit", chart, "--set", "tls.enabled=true,tls.http=mtls"); err == nil || !strings.Contains(out, "tls.http") {
		t.Errorf("tls.http=mtls without tls.clientAuth rendered: %v\n%s", err, out)
	}
	objs = render(t, helm(t, "template", "redlimit", chart, "--set", "tls.enabled=true,tls.clientAuth=true,tls.http=mtls"))
	checkManifests(t, objs)
	if args := asList(get(only(t, objs, "Deployment"), "spec", "template", "spec", "containers", 0, "args")); !slices.Contains(args, any("--http-tls=mtls")) {
		t.Errorf("tls.http=mtls: args %v", args)
	}

	// In a values file, YAML 1.1 reads off and on as booleans.
	for value, want := range map[string]string{"off": "--http-tls=off", "on": "--http-tls=on"} {
		values := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(values, []byte("tls:\n  enabled: true\n  http: "+value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		objs := render(t, helm(t, "template", "redlimit", chart, "-f", values))
		checkManifests(t, objs)
		if args := asList(get(only(t, objs, "Deployment"), "spec", "template", "spec", "containers", 0, "args")); !slices.Contains(args, any(want)) {
			t.Errorf("tls.http: %s in a values file: args %v, want %s", value, args, want)
		}
	}
}
