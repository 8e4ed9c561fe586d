package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// publishVersion is the version TestInstallFromModuleProxy publishes.
// service/go.mod requires the library at it, as a release would.
const publishVersion = "v0.1.0"

// TestInstallFromModuleProxy publishes both modules of this tree to a
// module proxy on disk and installs the command from it, as a user would:
// go install .../service/cmd/redlimit@version, outside any workspace.
// It fails if a published go.mod holds a replace, if the service needs a
// library that is not published, or if the version is not reported.
func TestInstallFromModuleProxy(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	proxy := t.TempDir()
	publish(t, proxy, "github.com/redlimit/redlimit", root)
	publish(t, proxy, "github.com/redlimit/redlimit/prometheus", filepath.Join(root, "prometheus"))
	publish(t, proxy, "github.com/redlimit/redlimit/service", filepath.Join(root, "service"))

	gobin := t.TempDir()
	install := exec.Command("go", "install", "github.com/redlimit/redlimit/service/cmd/redlimit@"+publishVersion)
	install.Dir = t.TempDir() // outside the workspace
	// Our modules come only from the proxy on disk, which answers first.
	// The others come from the module cache, which the build of this test
	// filled, or else from the usual proxy. No checksum database: ours
	// are not in one.
	usual, err := exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatal(err)
	}
	install.Env = append(os.Environ(),
		"GOWORK=off", "GOFLAGS=", "GOBIN="+gobin, "GOSUMDB=off", "GOPRIVATE=", "GONOPROXY=",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+strings.TrimSpace(string(usual)))
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "redlimit"), "version").CombinedOutput()
	if err != nil {
		t.Fatalf("redlimit version: %v\n%s", err, out)
	}
	if want := "redlimit " + publishVersion + " "; !strings.HasPrefix(string(out), want) {
		t.Errorf("redlimit version printed %q, want it to start with %q", out, want)
	}
}

// publish writes the module in dir at publishVersion into the file proxy
// at proxy, in the layout of GOPROXY=file://.
func publish(t *testing.T, proxy, path, dir string) {
	t.Helper()
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gomod), "\nreplace ") {
		t.Fatalf("%s/go.mod holds a replace: go install %s@version refuses it", dir, path)
	}
	esc, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(proxy, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	v := publishVersion
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("list", []byte(v+"\n"))
	write(v+".info", []byte(`{"Version":"`+v+`","Time":"2026-12-07T00:00:00Z"}`))
	write(v+".mod", gomod)
	f, err := os.Create(filepath.Join(at, v+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := modzip.CreateFromDir(f, module.Version{Path: path, Version: v}, dir); err != nil {
		t.Fatalf("zip of %s: %v", path, err)
	}
}
