package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// within runs f and fails the test if it has not returned after d: a load
// that hangs fails instead of hanging the test.
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("still running after %s", d)
		panic("unreachable")
	}
}

// allocated returns the bytes f allocates (in every goroutine, so a bound
// on it is generous).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// mergeChain returns a file of n descriptors where each merges the one
// before it: expanding every descriptor's merge keys in full visits
// n*(n-1)/2 mappings.
func mergeChain(n int) []byte {
	var b strings.Builder
	b.WriteString("domain: chain\ndescriptors:\n  - &a0 {key: k, value: v0}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  - &a%d {<<: *a%d, value: v%d}\n", i, i-1, i)
	}
	return []byte(b.String())
}

// TestParseMergeChainBounded checks that merge keys cannot make parsing
// quadratic: in a chain of 5,000 merges (190 KB; 12 million merged keys if
// expanded in full, seconds of work; the 800 KB took a minute), the
// descriptor whose merges nest more than maxMergeDepth deep is an error
// naming the file, its line and the reason.
func TestParseMergeChainBounded(t *testing.T) {
	data := mergeChain(5_000)
	err := within(t, 20*time.Second, func() error {
		_, err := Parse("chain.yaml", data)
		return err
	})
	var e *Error
	if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) {
		t.Fatalf("got %v, want an *Error", err)
	}
	// descriptors[i] is at line 3+i, and merges i mappings.
	want := Error{File: "chain.yaml", Line: 3 + maxMergeDepth + 1, Field: fmt.Sprintf("descriptors[%d]", maxMergeDepth+1),
		Msg: fmt.Sprintf("merge keys (<<) nest more than %d deep", maxMergeDepth)}
	if *e != want {
		t.Errorf("got  %+v\nwant %+v", *e, want)
	}

	// A chain as deep as allowed is fine.
	d, err := Parse("chain.yaml", mergeChain(maxMergeDepth+1))
	if err != nil || len(d.Descriptors) != maxMergeDepth+1 || d.Descriptors[maxMergeDepth].Key != "k" {
		t.Errorf("%d merges deep: %v", maxMergeDepth, err)
	}
}

// TestParseMergeFanBounded checks that the keys merge keys bring in are
// counted, however shallow: 1,000 descriptors that each merge the same
// 1,000 mappings (a list given by alias) would visit 2 million keys, 40
// times the allowance. The error names the line of the first descriptor
// past it.
func TestParseMergeFanBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: fan\ndescriptors:\n  - key: all\n    descriptors: &all\n")
	for i := range 1_000 {
		fmt.Fprintf(&b, "      - {key: k, value: v%d}\n", i)
	}
	for i := range 1_000 {
		fmt.Fprintf(&b, "  - {<<: *all, value: w%d}\n", i)
	}
	var err error
	n := allocated(func() {
		err = within(t, 20*time.Second, func() error {
			_, err := Parse("fan.yaml", []byte(b.String()))
			return err
		})
	})
	var e *Error
	if !errors.As(err, &e) || e.File != "fan.yaml" || e.Line < 1_005 || e.Line > 1_004+1_000 ||
		!strings.Contains(e.Msg, "merge keys (<<) expand to too many nodes") {
		t.Errorf("got %v, want too many nodes at the line of a merging descriptor", err)
	}
	if err != nil && strings.Count(err.Error(), "\n") > 0 {
		t.Errorf("errors after the nodes left were spent:\n%v", err)
	}
	t.Logf("%d bytes allocated", n)
}

// TestLoadFileTooLarge checks that a file above the cap is refused before
// it is read: a 4 MiB file of comments, which would parse, allocates next
// to nothing.
func TestLoadFileTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	data := []byte("domain: big\n" + strings.Repeat("#", DefaultMaxFileBytes))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	n := allocated(func() { _, err = Load(path) })
	var e *Error
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.File != path {
		t.Fatalf("got %v, want ErrTooLarge naming %s", err, path)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(DefaultMaxFileBytes)) {
		t.Errorf("%v does not give the cap", err)
	}
	if n > 1<<20 {
		t.Errorf("refusing it allocated %d bytes", n)
	}

	// At the cap, it loads (a smaller cap: parsing 4 MiB takes seconds
	// under the race detector).
	if err := os.WriteFile(path, data[:1000], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Loader{MaxFileBytes: 1000}).Load(t.Context(), path); err != nil {
		t.Errorf("at the cap: %v", err)
	}
	if _, err := (Loader{MaxFileBytes: 999}).Load(t.Context(), path); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a byte above the cap: %v", err)
	}
}

// TestLoadTotalTooLarge checks the cap on the files of a directory
// together, and that a Loader's caps apply.
func TestLoadTotalTooLarge(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a", "b", "c"} {
		data := fmt.Sprintf("domain: %s\n%s\n", name, strings.Repeat("#", 800))
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l := Loader{MaxFileBytes: 1000, MaxTotalBytes: 2000}
	_, err := l.Load(t.Context(), dir)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "2000") {
		t.Errorf("got %v, want ErrTooLarge with the total cap", err)
	}
	l.MaxTotalBytes = 3000
	if c, err := l.Load(t.Context(), dir); err != nil || len(c.Domains) != 3 {
		t.Errorf("under the caps: %v", err)
	}
	l.MaxFileBytes = 500
	if _, err := l.Load(t.Context(), dir); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "a.yaml") {
		t.Errorf("a file above its cap: got %v", err)
	}
}

// TestLoadCanceled checks that a load whose context is done stops before
// reading a file.
func TestLoadCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Loader{}).Load(ctx, "testdata/dir"); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// TestLoadReportsEveryBadFile checks that a directory's problems are all
// reported, each naming its file, not only the first one met: a file above
// the cap, a link to nowhere and a file that does not parse, beside a good
// file. `redlimit check` relies on it to list every bad file in one run.
func TestLoadReportsEveryBadFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a_big.yaml":  "domain: big\n" + strings.Repeat("#", 300),
		"b_bad.yaml":  "domain: bad\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
		"c_good.yaml": "domain: good\n",
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("nowhere.yaml", filepath.Join(dir, "d_dangling.yaml")); err != nil {
		t.Fatal(err)
	}
	_, err := (Loader{MaxFileBytes: 200}).Load(t.Context(), dir)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalid) {
		t.Errorf("got %v, want ErrTooLarge and ErrInvalid", err)
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		t.Errorf("got %v, want the link's *fs.PathError", err)
	}
	for _, want := range []string{"a_big.yaml", "b_bad.yaml:4", "fortnight", "d_dangling.yaml"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q:\n%v", want, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "c_good.yaml") {
		t.Errorf("the good file is named:\n%v", err)
	}
}
