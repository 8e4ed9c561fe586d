package fswatch

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSeesEveryReplacement is a randomized test: a path through links
// (a link to a directory, a link to a link, a link to the file, at random)
// sees every way of replacing the file, each several times in random
// order: written in place, renamed over, its directory replaced by a new
// one of its name, and each link on the way swapped atomically to a new
// copy of what it led to.
func TestSeesEveryReplacement(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 1))
			l := newLayout(t, rng)
			w, err := New([]string{l.path}, Options{Debounce: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			changed := make(chan struct{}, 100)
			done := make(chan struct{})
			go func() { defer close(done); w.Run(t.Context(), func() { changed <- struct{}{} }) }()
			t.Cleanup(func() { <-done })
			for i := range 12 {
				what := l.replace(rng)
				select {
				case <-changed:
				case <-time.After(10 * time.Second):
					t.Fatalf("step %d (%s) not seen; layout:\n%s", i, what, l.tree())
				}
				drain(changed, 50*time.Millisecond) // a late event of the same step
			}
		})
	}
}

// drain empties c until it stays quiet for quiet.
func drain(c chan struct{}, quiet time.Duration) {
	for {
		select {
		case <-c:
		case <-time.After(quiet):
			return
		}
	}
}

// layout is a file reached through links: root/link0 -> gen/..., each
// link swapped by renaming a new link over it.
type layout struct {
	t     *testing.T
	root  string
	path  string   // what is watched
	links []string // the links on the way, swappable
	n     int
}

func newLayout(t *testing.T, rng *rand.Rand) *layout {
	l := &layout{t: t, root: t.TempDir()}
	dir := l.mkdir()
	l.write(filepath.Join(dir, "rules.yaml"))
	// A link to the file beside it, sometimes (a ConfigMap's rules.yaml).
	file := "rules.yaml"
	if rng.IntN(2) == 0 {
		l.symlink("rules.yaml", filepath.Join(dir, "link.yaml"))
		file = "link.yaml"
	}
	// 1-3 links to the directory, each to the one before.
	target := dir
	for i := range 1 + rng.IntN(3) {
		link := filepath.Join(l.root, fmt.Sprint("current", i))
		l.symlink(filepath.Base(target), link)
		l.links = append(l.links, link)
		target = link
	}
	l.path = filepath.Join(target, file)
	if rng.IntN(3) == 0 {
		l.path = target // the directory itself
	}
	return l
}

func (l *layout) mkdir() string {
	l.n++
	d := filepath.Join(l.root, fmt.Sprint("gen", l.n))
	if err := os.Mkdir(d, 0o755); err != nil {
		l.t.Fatal(err)
	}
	return d
}

func (l *layout) write(name string) {
	l.n++
	if err := os.WriteFile(name, fmt.Append(nil, l.n), 0o644); err != nil {
		l.t.Fatal(err)
	}
}

func (l *layout) symlink(target, link string) {
	if err := os.Symlink(target, link); err != nil {
		l.t.Fatal(err)
	}
}

// swap points link at target atomically: ln -sfn target tmp && mv -T tmp link.
func (l *layout) swap(target, link string) {
	tmp := link + ".tmp"
	l.symlink(target, tmp)
	if err := os.Rename(tmp, link); err != nil {
		l.t.Fatal(err)
	}
}

// replace changes the file one way, at random, and says how.
func (l *layout) replace(rng *rand.Rand) string {
	real, err := filepath.EvalSymlinks(l.links[0])
	if err != nil {
		l.t.Fatal(err)
	}
	switch rng.IntN(4) {
	case 3:
		// The directory itself replaced by a new one of its name.
		if err := os.Rename(real, real+".old"); err != nil {
			l.t.Fatal(err)
		}
		if err := os.Mkdir(real, 0o755); err != nil {
			l.t.Fatal(err)
		}
		l.copyDir(real+".old", real)
		if err := os.RemoveAll(real + ".old"); err != nil {
			l.t.Fatal(err)
		}
		return "the directory replaced"
	case 0:
		l.write(filepath.Join(real, "rules.yaml"))
		return "written in place"
	case 1:
		tmp := filepath.Join(real, ".tmp")
		l.write(tmp)
		if err := os.Rename(tmp, filepath.Join(real, "rules.yaml")); err != nil {
			l.t.Fatal(err)
		}
		return "renamed over"
	}
	// A new copy of the directory, and a link on the way swapped to it
	// (or, for a link to a link, to a new link to the same place).
	i := rng.IntN(len(l.links))
	if i > 0 {
		l.n++
		fresh := filepath.Join(l.root, fmt.Sprint("alias", l.n))
		l.symlink(filepath.Base(l.links[i-1]), fresh)
		l.write(filepath.Join(real, "rules.yaml"))
		l.swap(filepath.Base(fresh), l.links[i])
		return fmt.Sprintf("link %d swapped to a new link", i)
	}
	d := l.mkdir()
	l.copyDir(real, d)
	l.swap(filepath.Base(d), l.links[0])
	return "link 0 swapped to a new directory"
}

// copyDir copies the links of from to to, and writes new files of their
// names.
func (l *layout) copyDir(from, to string) {
	entries, err := os.ReadDir(from)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, e := range entries {
		src := filepath.Join(from, e.Name())
		if e.Type()&os.ModeSymlink != 0 {
			target, _ := os.Readlink(src)
			l.symlink(target, filepath.Join(to, e.Name()))
			continue
		}
		l.write(filepath.Join(to, e.Name()))
	}
}

// tree lists the layout, for a failure's message.
func (l *layout) tree() string {
	var s string
	filepath.WalkDir(l.root, func(p string, d os.DirEntry, _ error) error {
		if target, err := os.Readlink(p); err == nil {
			s += fmt.Sprintf("%s -> %s\n", p, target)
		} else {
			s += p + "\n"
		}
		return nil
	})
	return s + "watched: " + l.path
}
