// Package deploy holds the files that deploy redlimit (image/, kubernetes/,
// helm/redlimit/) and, in its tests, the checks on them: the Kubernetes
// manifests and the Helm chart's rendering must keep the probes, ports,
// security context, resources and graceful termination that
// docs/OPERATIONS.md describes.
package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/redlimit/redlimit/service/internal/rulecheck"
)

// object is one decoded Kubernetes object.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := get(o, "metadata", "name").(string); return s }

// get follows keys (string for maps, int for lists) from v; nil if a step
// is missing.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				if o, isObj := v.(object); isObj {
					m, ok = map[string]any(o), true
				}
			}
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// decodeAll decodes every YAML document of r, leaving out empty ones.
func decodeAll(r io.Reader) ([]object, error) {
	var objs []object
	dec := yaml.NewDecoder(r)
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if o != nil {
			objs = append(objs, object(o))
		}
	}
}

// kustomized returns the objects of service/deploy/kubernetes as `kubectl apply -k`
// makes them: the files its kustomization.yaml lists, with its image names
// replaced.
func kustomized(t *testing.T) []object {
	t.Helper()
	data, err := os.ReadFile("kubernetes/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Resources []string `yaml:"resources"`
		Images    []struct {
			Name    string `yaml:"name"`
			NewName string `yaml:"newName"`
			NewTag  string `yaml:"newTag"`
		} `yaml:"images"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	files, _ := filepath.Glob("kubernetes/*.yaml")
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("kustomization.yaml does not list %s", base)
		}
	}
	var objs []object
	for _, res := range k.Resources {
		f, err := os.Open(filepath.Join("kubernetes", res))
		if err != nil {
			t.Fatal(err)
		}
		o, err := decodeAll(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", res, err)
		}
		objs = append(objs, o...)
	}
	for _, o := range objs {
		for _, c := range asList(get(o, "spec", "template", "spec", "containers")) {
			c := c.(map[string]any)
			for _, img := range k.Images {
				if c["image"] == img.Name {
					c["image"] = img.NewName + ":" + img.NewTag
				}
			}
		}
	}
	return objs
}

func asList(v any) []any { l, _ := v.([]any); return l }

// TestKubernetesManifests checks service/deploy/kubernetes.
func TestKubernetesManifests(t *testing.T) {
	objs := kustomized(t)
	checkManifests(t, objs)
	d := only(t, objs, "Deployment")
	// The image make image builds.
	if img := get(d, "spec", "template", "spec", "containers", 0, "image"); img != "localhost/redlimit:dev" {
		t.Errorf("image %v, want localhost/redlimit:dev (kustomization.yaml's images)", img)
	}
}

// only returns the one object of kind among objs.
func only(t *testing.T, objs []object, kind string) object {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.kind() == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return found[0]
}

// envoyTimeout is the default timeout of Envoy's rate limit filter:
// redlimit's --timeout must stay below it.
const envoyTimeout = 20 * time.Millisecond

// checkManifests checks what a deployment of redlimit must hold, whatever
// its names: the probes, the ports, the security context, the resources,
// the rules mounted whole and loadable, and a termination grace period
// that covers the preStop sleep and the shutdown timeout.
func checkManifests(t *testing.T, objs []object) {
	t.Helper()
	for _, o := range objs {
		if get(o, "metadata", "labels", "app.kubernetes.io/name") != "redlimit" {
			t.Errorf("%s %s: no label app.kubernetes.io/name: redlimit", o.kind(), o.name())
		}
	}
	d := only(t, objs, "Deployment")
	pod := get(d, "spec", "template")
	spec := get(pod, "spec")
	podLabels, _ := get(pod, "metadata", "labels").(map[string]any)
	if r, _ := get(d, "spec", "replicas").(int); r < 2 {
		t.Errorf("replicas %v, want 2 or more", get(d, "spec", "replicas"))
	}
	if !selects(get(d, "spec", "selector", "matchLabels"), podLabels) {
		t.Errorf("the Deployment's selector does not select its pods")
	}
	if get(d, "spec", "strategy", "rollingUpdate", "maxUnavailable") != 0 {
		t.Errorf("rolling updates may take replicas down before new ones are ready")
	}
	if get(spec, "automountServiceAccountToken") != false {
		t.Errorf("the pod mounts a service account token it does not use")
	}
	want := map[string]any{"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532}
	for k, v := range want {
		if got := get(spec, "securityContext", k); got != v {
			t.Errorf("pod securityContext.%s = %v, want %v", k, got, v)
		}
	}
	if get(spec, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
		t.Errorf("pod seccompProfile: %v", get(spec, "securityContext", "seccompProfile"))
	}

	containers := asList(get(spec, "containers"))
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c := containers[0]
	for k, v := range map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true} {
		if got := get(c, "securityContext", k); got != v {
			t.Errorf("container securityContext.%s = %v, want %v", k, got, v)
		}
	}
	if drop := asList(get(c, "securityContext", "capabilities", "drop")); len(drop) != 1 || drop[0] != "ALL" {
		t.Errorf("capabilities.drop = %v, want [ALL]", drop)
	}
	if add := get(c, "securityContext", "capabilities", "add"); add != nil {
		t.Errorf("capabilities.add = %v", add)
	}
	for _, path := range [][]any{{"requests", "cpu"}, {"requests", "memory"}, {"limits", "memory"}} {
		if get(c, append([]any{"resources"}, path...)...) == nil {
			t.Errorf("no resources.%s.%s", path[0], path[1])
		}
	}

	ports := map[string]int{}
	for _, p := range asList(get(c, "ports")) {
		name, _ := get(p, "name").(string)
		ports[name], _ = get(p, "containerPort").(int)
	}
	if ports["grpc"] != 8081 || ports["http"] != 8080 || ports["probe"] != 8082 || len(ports) != 3 {
		t.Errorf("container ports %v, want grpc 8081, http 8080 and probe 8082", ports)
	}
	// The probes on the probe port, in plain HTTP: clients holding the
	// HTTP port's connections cannot starve them.
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
		if get(c, probe, "httpGet", "path") != path || get(c, probe, "httpGet", "port") != "probe" {
			t.Errorf("%s: %v, want GET %s on the probe port", probe, get(c, probe), path)
		}
		if s := get(c, probe, "httpGet", "scheme"); s != nil && s != "HTTP" {
			t.Errorf("%s: scheme %v; the probe port serves plain HTTP", probe, s)
		}
		if s, _ := get(c, probe, "timeoutSeconds").(int); s < 2 {
			t.Errorf("%s.timeoutSeconds %v: /readyz may take 1 s to ping Redis", probe, get(c, probe, "timeoutSeconds"))
		}
	}

	if len(asList(get(c, "args"))) == 0 {
		t.Fatalf("the container has no args")
	}
	args := map[string]string{}
	for _, a := range asList(get(c, "args"))[1:] {
		k, v, _ := strings.Cut(a.(string), "=")
		args[k] = v
	}
	if get(c, "args", 0) != "serve" {
		t.Errorf("args %v: want serve first", get(c, "args"))
	}
	for k, v := range map[string]string{"--grpc-addr": ":8081", "--http-addr": ":8080", "--probe-addr": ":8082", "--dashboard": "false"} {
		if args[k] != v {
			t.Errorf("%s=%q, want %q", k, args[k], v)
		}
	}
	// SECURITY.md's checklist: overrides refused (the Envoy configurations
	// of OPERATIONS.md send none), and the names the HTTP port is reached
	// by listed.
	if o := args["--limit-overrides"]; o != "refuse" {
		t.Errorf("--limit-overrides=%q, want refuse", o)
	}
	hosts := strings.Split(args["--allowed-hosts"], ",")
	for _, s := range objs {
		if s.kind() == "Service" && get(s, "spec", "clusterIP") != "None" && !slices.Contains(hosts, s.name()) {
			t.Errorf("--allowed-hosts=%q: no %s, the Service's name (curl http://%s:8080/rules would get 421)", args["--allowed-hosts"], s.name(), s.name())
		}
	}
	if slices.Contains(hosts, "*") {
		t.Errorf("--allowed-hosts=%q: any Host", args["--allowed-hosts"])
	}
	if p := get(pod, "metadata", "annotations", "prometheus.io/port"); p != fmt.Sprint(ports["http"]) {
		t.Errorf("prometheus.io/port %v, want the http port %d", p, ports["http"])
	}
	timeout, err := time.ParseDuration(args["--timeout"])
	if err != nil || timeout <= 0 || timeout >= envoyTimeout {
		t.Errorf("--timeout=%q: want it below Envoy's %v (%v)", args["--timeout"], envoyTimeout, err)
	}
	shutdown, err := time.ParseDuration(args["--shutdown-timeout"])
	if err != nil {
		t.Errorf("--shutdown-timeout=%q: %v", args["--shutdown-timeout"], err)
	}
	sleep, _ := get(c, "lifecycle", "preStop", "sleep", "seconds").(int)
	if sleep < 1 {
		t.Errorf("no preStop sleep: %v", get(c, "lifecycle"))
	}
	grace, _ := get(spec, "terminationGracePeriodSeconds").(int)
	if need := time.Duration(sleep)*time.Second + shutdown; time.Duration(grace)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %d does not cover the preStop sleep and --shutdown-timeout (%v)", grace, need)
	}
	var redisFromSecret bool
	for _, e := range asList(get(c, "env")) {
		if get(e, "name") == "REDLIMIT_REDIS" && get(e, "valueFrom", "secretKeyRef", "name") != nil {
			redisFromSecret = true
		}
	}
	if !redisFromSecret {
		t.Errorf("REDLIMIT_REDIS is not read from a Secret: %v", get(c, "env"))
	}

	// The rules: a ConfigMap mounted whole (a subPath would receive no
	// update) where --config points, read-only, that `redlimit check` takes.
	var mount any
	for _, m := range asList(get(c, "volumeMounts")) {
		if get(m, "mountPath") == args["--config"] {
			mount = m
		}
	}
	if mount == nil || get(mount, "readOnly") != true || get(mount, "subPath") != nil {
		t.Fatalf("--config=%s: no read-only mount of a whole volume there: %v", args["--config"], get(c, "volumeMounts"))
	}
	var cmName any
	for _, v := range asList(get(spec, "volumes")) {
		if get(v, "name") == get(mount, "name") {
			cmName = get(v, "configMap", "name")
		}
	}
	var cm object
	for _, o := range objs {
		if o.kind() == "ConfigMap" && o.name() == cmName {
			cm = o
		}
	}
	if cm == nil {
		t.Fatalf("the rules volume names ConfigMap %v, which is not among the objects", cmName)
	}
	dir := t.TempDir()
	for name, data := range get(cm, "data").(map[string]any) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data.(string)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if r := rulecheck.Check(t.Context(), rulecheck.Options{Path: dir}); !r.OK || len(r.Rules) == 0 {
		t.Errorf("the rules of ConfigMap %v do not load: %+v", cmName, r.Problems)
	}

	// The Services: gRPC and HTTP by name to the container's ports, and a
	// headless one for Envoy's STRICT_DNS; all select the pods.
	var full, headless bool
	for _, s := range objs {
		if s.kind() != "Service" {
			continue
		}
		if !selects(get(s, "spec", "selector"), podLabels) {
			t.Errorf("Service %s does not select the pods", s.name())
		}
		sp := map[string]string{}
		for _, p := range asList(get(s, "spec", "ports")) {
			sp[fmt.Sprint(get(p, "name"))] = fmt.Sprintf("%v->%v %v", get(p, "port"), get(p, "targetPort"), get(p, "appProtocol"))
		}
		switch get(s, "spec", "clusterIP") {
		case "None":
			headless = sp["grpc"] == "8081->grpc grpc"
		default:
			full = sp["grpc"] == "8081->grpc grpc" && sp["http"] == "8080->http http"
		}
	}
	if !full || !headless {
		t.Errorf("want a Service with grpc 8081 and http 8080 (%v), and a headless one with grpc (%v)", full, headless)
	}

	checkNetworkPolicy(t, only(t, objs, "NetworkPolicy"), podLabels, ports)

	pdb := only(t, objs, "PodDisruptionBudget")
	if !selects(get(pdb, "spec", "selector", "matchLabels"), podLabels) {
		t.Errorf("the PodDisruptionBudget does not select the pods")
	}
	if get(pdb, "spec", "maxUnavailable") != 1 {
		t.Errorf("PodDisruptionBudget maxUnavailable %v, want 1", get(pdb, "spec", "maxUnavailable"))
	}
}

// checkNetworkPolicy checks that np admits gRPC and HTTP from chosen peers
// alone, and the probe port from none (the kubelet's probes come from the
// node, which a policy does not stop).
func checkNetworkPolicy(t *testing.T, np object, podLabels map[string]any, ports map[string]int) {
	t.Helper()
	if !selects(get(np, "spec", "podSelector", "matchLabels"), podLabels) {
		t.Errorf("the NetworkPolicy does not select the pods")
	}
	if types := asList(get(np, "spec", "policyTypes")); !slices.Contains(types, any("Ingress")) {
		t.Errorf("NetworkPolicy policyTypes %v: no Ingress", types)
	}
	opened := map[int]bool{}
	for i, rule := range asList(get(np, "spec", "ingress")) {
		if len(asList(get(rule, "from"))) == 0 {
			t.Errorf("NetworkPolicy ingress %d admits any peer", i)
		}
		rulePorts := asList(get(rule, "ports"))
		if len(rulePorts) == 0 {
			t.Errorf("NetworkPolicy ingress %d admits every port", i)
		}
		for _, p := range rulePorts {
			switch v := get(p, "port").(type) {
			case int:
				opened[v] = true
			case string:
				opened[ports[v]] = true
			}
		}
	}
	if !opened[ports["grpc"]] || !opened[ports["http"]] || opened[ports["probe"]] || len(opened) != 2 {
		t.Errorf("NetworkPolicy opens ports %v; want grpc %d and http %d alone", opened, ports["grpc"], ports["http"])
	}
}

// selects reports whether the non-empty selector sel matches labels.
func selects(sel any, labels map[string]any) bool {
	m, _ := sel.(map[string]any)
	if len(m) == 0 {
		return false
	}
	for k, v := range m {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// render decodes the output of helm template.
func render(t *testing.T, out []byte) []object {
	t.Helper()
	objs, err := decodeAll(bytes.NewReader(out))
	if err != nil {
		t.Fatalf("helm template's output: %v\n%s", err, out)
	}
	return objs
}

// TestContainerfile checks that the image and the manifests agree: the
// image's user is the pods' runAsUser, it exposes the container's ports,
// and nothing in it is pulled from a registry (FROM scratch only).
func TestContainerfile(t *testing.T) {
	data, err := os.ReadFile("image/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	var from, user, expose []string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "FROM":
			from = append(from, f[1:]...)
		case "USER":
			user = f[1:]
		case "EXPOSE":
			expose = f[1:]
		}
	}
	if !slices.Equal(from, []string{"scratch"}) {
		t.Errorf("FROM %v, want scratch alone: no base image pulled", from)
	}
	d := only(t, kustomized(t), "Deployment")
	sc := get(d, "spec", "template", "spec", "securityContext")
	if want := fmt.Sprintf("%v:%v", get(sc, "runAsUser"), get(sc, "runAsGroup")); !slices.Equal(user, []string{want}) {
		t.Errorf("USER %v, want %s as the pods run", user, want)
	}
	var ports []string
	for _, p := range asList(get(d, "spec", "template", "spec", "containers", 0, "ports")) {
		ports = append(ports, fmt.Sprint(get(p, "containerPort")))
	}
	slices.Sort(ports)
	slices.Sort(expose)
	if !slices.Equal(expose, ports) {
		t.Errorf("EXPOSE %v, want the container's ports %v", expose, ports)
	}
}
