package deploy

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// helmPkg is the helm command, at the pinned version, run with `go run`:
// helm is not a dependency of redlimit's module, whose users it would
// burden with Kubernetes' module graph.
const (
	helmModule  = "helm.sh/helm/v4"
	helmVersion = "v4.3.2"
	helmPkg     = helmModule + "/cmd/helm@" + helmVersion
)

// helmEnv, set (as by make helm-test), makes TestHelm build helm if it is
// not built yet, which takes minutes; otherwise TestHelm runs only when
// `go run` has helm in its cache, and is skipped if not.
const helmEnv = "REDLIMIT_HELM_TEST"

var (
	helmOnce sync.Once
	helmBin  string // the executable `go run helmPkg` runs, from Go's build cache
	helmWhy  string // why there is none
)

// goCmd returns the go command of the toolchain running the test.
func goCmd() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// findHelm sets helmBin to the executable `go run helmPkg` runs. `go run
// -n` prints the command it would run: one line naming the cached
// executable once it is built, the build's commands before.
func findHelm(build bool) {
	goBin := goCmd()
	out, err := exec.Command(goBin, "env", "GOMODCACHE").Output()
	if err != nil {
		helmWhy = "go env GOMODCACHE: " + err.Error()
		return
	}
	zip := filepath.Join(strings.TrimSpace(string(out)), "cache", "download", helmModule, "@v", helmVersion+".zip")
	if _, err := os.Stat(zip); err != nil && !build {
		helmWhy = helmPkg + " is not downloaded (make helm-test builds it, once)"
		return
	}
	if build {
		cmd := exec.Command(goBin, "run", helmPkg, "version")
		cmd.Dir = os.TempDir() // outside this module: helm's own go.mod rules
		if out, err := cmd.CombinedOutput(); err != nil {
			helmWhy = "go run " + helmPkg + ": " + err.Error() + "\n" + string(out)
			return
		}
	}
	cmd := exec.Command(goBin, "run", "-n", helmPkg)
	cmd.Dir = os.TempDir()
	out, err = cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 1 {
		helmWhy = helmPkg + " is not built (make helm-test builds it, once)"
		return
	}
	if _, err := os.Stat(lines[0]); err != nil {
		helmWhy = "go run -n " + helmPkg + ": " + err.Error()
		return
	}
	helmBin = lines[0]
}

// helm runs helm with args and returns its standard output; it fails the
// test if helm fails or takes over a minute.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := helmErr(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return []byte(out)
}

// helmErr runs helm with args and returns its standard output, and its
// error with the standard error after the output.
func helmErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	helmOnce.Do(func() { findHelm(os.Getenv(helmEnv) != "") })
	if helmBin == "" {
		if os.Getenv(helmEnv) != "" {
			t.Fatal(helmWhy)
		}
		t.Skip(helmWhy)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

const chart = "helm/redlimit"

// TestHelmLint runs helm lint --strict on the chart, with its defaults and
// with other values.
func TestHelmLint(t *testing.T) {
	helm(t, "lint", "--strict", chart)
	helm(t, "lint", "--strict", chart, "--set", "redis.url=redis://redis:6379,preStopSleepSeconds=0,headlessService.enabled=false")
}

// TestHelmTemplate checks what the chart renders: with its default values
// and the release named redlimit in the namespace redlimit, the objects of service/deploy/kubernetes, but
// for Helm's labels; with other values, objects that pass the same checks.
func TestHelmTemplate(t *testing.T) {
	objs := render(t, helm(t, "template", "redlimit", chart, "--namespace", "redlimit"))
	checkManifests(t, objs)

	raw := kustomized(t)
	byKey := func(objs []object) map[string]object {
		m := map[string]object{}
		for _, o := range objs {
			m[o.kind()+"/"+o.name()] = normalize(o)
		}
		return m
	}
	rendered, want := byKey(objs), byKey(raw)
	for key, w := range want {
		got, ok := rendered[key]
		switch {
		case !ok:
			t.Errorf("%s: not rendered", key)
		case !reflect.DeepEqual(got, w):
			g, _ := yaml.Marshal(got)
			wb, _ := yaml.Marshal(w)
			t.Errorf("%s differs from service/deploy/kubernetes:\nrendered:\n%s\ndeploy/kubernetes:\n%s", key, g, wb)
		}
	}
	for key := range rendered {
		if _, ok := want[key]; !ok {
			t.Errorf("%s: rendered, not in service/deploy/kubernetes", key)
		}
	}

	// Another release, with the Secret made by the chart and an image of
	// its own: the same checks hold, and the names follow the release.
	objs = render(t, helm(t, "template", "edge", chart, "--namespace", "limits",
		"--set", "redis.url=redis://redis.limits:6379,image.repository=registry.example/redlimit,image.tag=1.2.3,replicaCount=4"))
	checkManifests(t, objs)
	d := only(t, objs, "Deployment")
	if d.name() != "edge-redlimit" || get(d, "spec", "replicas") != 4 ||
		get(d, "spec", "template", "spec", "containers", 0, "image") != "registry.example/redlimit:1.2.3" {
		t.Errorf("Deployment %s: replicas %v, image %v", d.name(), get(d, "spec", "replicas"),
			get(d, "spec", "template", "spec", "containers", 0, "image"))
	}
	s := only(t, objs, "Secret")
	ref := get(d, "spec", "template", "spec", "containers", 0, "env", 0, "valueFrom", "secretKeyRef")
	if s.name() != "edge-redlimit-redis" || get(ref, "name") != s.name() || get(s, "stringData", get(ref, "key")) != "redis://redis.limits:6379" {
		t.Errorf("Secret %s %v, referred to as %v", s.name(), get(s, "stringData"), ref)
	}
	if sel := get(d, "spec", "selector", "matchLabels", "app.kubernetes.io/instance"); sel != "edge" {
		t.Errorf("the selector does not name the release: %v", get(d, "spec", "selector"))
	}
	args := asList(get(d, "spec", "template", "spec", "containers", 0, "args"))
	if !slices.Contains(args, any("--allowed-hosts=edge-redlimit,edge-redlimit.limits,edge-redlimit.limits.svc,edge-redlimit.limits.svc.cluster.local")) {
		t.Errorf("args %v: want the Service's names in the release's namespace in --allowed-hosts", args)
	}

	// Other ports: the Prometheus annotation and the probes follow them.
	d = only(t, render(t, helm(t, "template", "redlimit", chart, "--set", "service.httpPort=9090,probePort=9091")), "Deployment")
	pod := get(d, "spec", "template")
	if p := get(pod, "metadata", "annotations", "prometheus.io/port"); p != "9090" {
		t.Errorf("service.httpPort 9090: prometheus.io/port %v", p)
	}
	if p := get(pod, "spec", "containers", 0, "ports", 2, "containerPort"); p != 9091 {
		t.Errorf("probePort 9091: container port %v", p)
	}
}

// helmLabels are the labels the chart adds to those of service/deploy/kubernetes.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// normalize returns a copy of v without helmLabels in any labels,
// matchLabels or Service selector.
func normalize[T any](v T) T {
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case object:
			return object(walk(map[string]any(x)).(map[string]any))
		case map[string]any:
			m := make(map[string]any, len(x))
			for k, e := range x {
				if lm, ok := e.(map[string]any); ok && (k == "labels" || k == "matchLabels" || k == "selector") {
					c := make(map[string]any, len(lm))
					for lk, lv := range lm {
						c[lk] = lv
					}
					for _, h := range helmLabels {
						delete(c, h)
					}
					e = c
				}
				m[k] = walk(e)
			}
			return m
		case []any:
			l := make([]any, len(x))
			for i, e := range x {
				l[i] = walk(e)
			}
			return l
		}
		return v
	}
	return walk(v).(T)
}
