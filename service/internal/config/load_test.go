package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLoadDir loads a directory with files Load must skip: a dotfile, a
// .txt file, a file with no extension and a subdirectory named like a rule
// file. All of them would fail to load.
func TestLoadDir(t *testing.T) {
	c := mustLoad(t, "testdata/dir")
	wantFiles := []string{"testdata/dir/api.yaml", "testdata/dir/web.yml"}
	if !reflect.DeepEqual(c.Files, wantFiles) {
		t.Errorf("files %q, want %q", c.Files, wantFiles)
	}
	if len(c.Domains) != 2 || c.Domains["api"].File != wantFiles[0] || c.Domains["web"].File != wantFiles[1] {
		t.Errorf("domains %v", c.Domains)
	}
	if r := c.Match("web", e("path", "/login")); r == nil || r.Path != "web.path_/login" || r.File != wantFiles[1] {
		t.Errorf("web rule: %+v", r)
	}
	var paths []string
	for _, r := range c.Rules() {
		paths = append(paths, r.Path)
	}
	if want := []string{"api.user", "web.path_/login"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("rules %q, want %q", paths, want)
	}
}

// TestLoadFile loads a file named explicitly, whatever its name.
func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".rules.conf")
	if err := os.WriteFile(path, []byte("domain: conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustLoad(t, path)
	if c.Domains["conf"] == nil || !reflect.DeepEqual(c.Files, []string{path}) {
		t.Errorf("got %+v", c)
	}
}

// TestLoadEmptyDir checks that an empty directory is a valid config with no
// domains, under which nothing matches.
func TestLoadEmptyDir(t *testing.T) {
	c := mustLoad(t, t.TempDir())
	if len(c.Domains) != 0 || c.Files == nil || len(c.Files) != 0 || len(c.Rules()) != 0 {
		t.Errorf("got %+v", c)
	}
	if r := c.Match("api", e("user", "x")); r != nil {
		t.Errorf("matched %v", r)
	}
}

// TestLoadConfigMap loads a directory laid out as Kubernetes mounts a
// ConfigMap, then swaps its data as the kubelet does on an update.
func TestLoadConfigMap(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	symlink := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// /etc/redlimit/..2024_05_01_10_00_00.000000001/api.yaml
	// /etc/redlimit/..data -> ..2024_05_01_10_00_00.000000001
	// /etc/redlimit/api.yaml -> ..data/api.yaml
	const v1, v2 = "..2024_05_01_10_00_00.000000001", "..2024_05_02_10_00_00.000000002"
	write(v1+"/api.yaml", "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 10}\n")
	write(v1+"/broken.yaml", "not: [valid") // reachable only through ..data: never loaded
	symlink(v1, "..data")
	symlink("..data/api.yaml", "api.yaml")

	c := mustLoad(t, dir)
	if want := []string{filepath.Join(dir, "api.yaml")}; !reflect.DeepEqual(c.Files, want) {
		t.Errorf("files %q, want %q", c.Files, want)
	}
	if r := c.Match("api", e("user", "u")); r == nil || r.Limit.Count != 10 {
		t.Fatalf("rule %+v, want 10/s", r)
	}

	// The kubelet writes the new version, swaps ..data atomically (a new
	// link renamed over the old one), and removes the old version.
	write(v2+"/api.yaml", "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 20}\n")
	symlink(v2, "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, v1)); err != nil {
		t.Fatal(err)
	}
	c = mustLoad(t, dir)
	if r := c.Match("api", e("user", "u")); r == nil || r.Limit.Count != 20 {
		t.Fatalf("after the swap: rule %+v, want 20/s", r)
	}

	// A link to a file gone from the new version is an error, not a
	// silently dropped domain.
	symlink("..data/gone.yaml", "gone.yaml")
	if _, err := Load(dir); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "gone.yaml") {
		t.Errorf("dangling link: got %v, want a not-exist error naming gone.yaml", err)
	}
}

// TestLoadDuplicateDomain checks that two files may not define one domain.
func TestLoadDuplicateDomain(t *testing.T) {
	_, err := Load("testdata/dupdomain")
	var e *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error", err)
	}
	want := `testdata/dupdomain/b.yaml: domain: domain "shared" is already defined in testdata/dupdomain/a.yaml (one file per domain, unless merged: --merge-domains, as envoy's MERGE_DOMAIN_CONFIG)`
	if err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

// TestLoadErrorsOfEveryFile checks that a directory's errors name every
// broken file.
func TestLoadErrorsOfEveryFile(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{
		"a.yaml": "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
		"b.yaml": "domain: b\nextra: 1\n",
		"c.yaml": "domain: c\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		filepath.Join(dir, "a.yaml") + `:4: descriptors[0].rate_limit.unit: unknown unit "fortnight"`,
		filepath.Join(dir, "b.yaml") + `:2: extra: unknown key`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not contain %q", err, want)
		}
	}
}

// TestLoadMissing checks that a path that cannot be read is an I/O error,
// not ErrInvalid.
func TestLoadMissing(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nothing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalid) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

// TestNew checks building a Config from domains made by hand.
func TestNew(t *testing.T) {
	rule := &Rule{Path: "hand.user", Unlimited: true}
	a := &Domain{Name: "hand", File: "a.yaml", Descriptors: []*Descriptor{{Key: "user", Rule: rule}}}
	c, err := New(a)
	if err != nil {
		t.Fatal(err)
	}
	if !a.indexed || c.Match("hand", e("user", "x")) != rule || !reflect.DeepEqual(c.Files, []string{"a.yaml"}) {
		t.Errorf("got %+v", c)
	}
	_, err = New(a, &Domain{Name: "hand", File: "b.yaml"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `b.yaml: domain: domain "hand" is already defined in a.yaml`) {
		t.Errorf("duplicate: got %v", err)
	}
}
