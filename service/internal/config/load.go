package config

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/redlimit/redlimit"
)

// Defaults of [Loader]: caps well above any rule file written by hand.
// The largest examples of envoyproxy/ratelimit are a few KiB. The caps
// bound what a load may allocate. Parsing takes memory in proportion to
// the YAML, for the moment it lasts (docs/OPERATIONS.md has the figures).
const (
	// DefaultMaxFileBytes caps one rule file: 4 MiB, some 40,000 rules.
	DefaultMaxFileBytes = 4 << 20
	// DefaultMaxTotalBytes caps the rule files of one load together.
	DefaultMaxTotalBytes = 16 << 20
)

// Loader loads rule files, within caps on their size. Its zero value has
// the default caps; a Loader is safe for concurrent use.
type Loader struct {
	// MaxFileBytes caps each file (default [DefaultMaxFileBytes]).
	MaxFileBytes int64
	// MaxTotalBytes caps the files of one load together (default
	// [DefaultMaxTotalBytes]).
	MaxTotalBytes int64
	// MergeDomains merges the files that hold one domain, as
	// envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does. Their top-level
	// descriptors make one tree, in the order the files are read. Two of
	// one name in two files are an error. Without it (the default), a
	// domain in two files is an error.
	MergeDomains bool
	// DefaultAlgorithm counts the limits whose file and rule name no
	// algorithm (default redlimit.SlidingWindow; redlimit.FixedWindow is
	// envoyproxy/ratelimit's only one).
	DefaultAlgorithm redlimit.Algorithm
}

// Load reads path with a [Loader] of default caps; see [Loader.Load].
func Load(path string) (*Config, error) {
	return Loader{}.Load(context.Background(), path)
}

// Load reads path: a YAML file, or a directory whose *.yaml and *.yml files
// are loaded (other files and dotfiles ignored). Errors name the file, the
// line and the field.
//
// A directory is read without descending into subdirectories, in name
// order. Names starting with "." are skipped. That leaves out the "..data"
// and "..2024_01_01_..." entries of a Kubernetes ConfigMap mount. Its
// "rules.yaml -> ..data/rules.yaml" symbolic links are followed. Only
// regular files are read, after following links. A directory entry that
// is a directory is skipped. A named pipe, a device or a socket, as the
// path or in the directory, is an error wrapping [ErrNotRegular]. That is
// checked before it is opened, and again on the open file. The file is
// opened without waiting for a writer. A link to nowhere is an error. An
// empty directory is a valid Config with no domains, under which every
// request is allowed. A path naming a file loads it whatever its name.
//
// A file above MaxFileBytes, or files above MaxTotalBytes together, are an
// error wrapping [ErrTooLarge]. It is given before they are read when
// their size shows it. Aliases and merge keys may add at most a fixed
// number of nodes to what a file holds (see package doc, "Errors"). So the
// work of loading is linear in the bytes read. A load whose ctx is done
// stops before the next file, with ctx's error.
//
// A file that cannot be read gives its [os.PathError]. Problems in the
// files give [*Error] values wrapping [ErrInvalid]. Every bad file of a
// directory is reported, joined with [errors.Join]. A bad file cannot be
// read, is not regular, is above MaxFileBytes or does not parse. It is set
// aside, and the others are still read. So one load lists them all. Only
// the path itself, the cap on all files together and ctx stop a load at
// once. Two files of one domain are an error, unless MergeDomains merges
// them.
func (l Loader) Load(ctx context.Context, path string) (*Config, error) {
	maxFile, maxTotal := l.MaxFileBytes, l.MaxTotalBytes
	if maxFile <= 0 {
		maxFile = DefaultMaxFileBytes
	}
	if maxTotal <= 0 {
		maxTotal = DefaultMaxTotalBytes
	}
	listed, errs, err := ruleFiles(path)
	if err != nil {
		return nil, err
	}
	files := make([]ruleFile, 0, len(listed))
	var total int64
	for _, f := range listed {
		if f.size > maxFile {
			errs = append(errs, tooLarge(f.name, f.size, maxFile))
			continue
		}
		if total += f.size; total > maxTotal {
			return nil, joinErrors(append(errs, totalTooLarge(f.name, maxTotal)))
		}
		files = append(files, f)
	}
	domains := make([]*Domain, 0, len(files))
	total = 0
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := readRuleFile(f.name, maxFile)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if total += int64(len(data)); total > maxTotal { // grown since the stat
			return nil, joinErrors(append(errs, totalTooLarge(f.name, maxTotal)))
		}
		d, err := parse(f.name, data, true, l.DefaultAlgorithm)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		domains = append(domains, d)
	}
	return assemble(domains, errs, l.MergeDomains)
}

// assemble returns the configuration of the parsed domains, merged as
// Loader.MergeDomains if mergeAll, or errs with the problems it finds.
func assemble(domains []*Domain, errs []error, mergeAll bool) (*Config, error) {
	if mergeAll {
		var merr []error
		domains, merr = merge(domains)
		errs = append(errs, merr...)
	} else {
		for _, d := range domains {
			errs = append(errs, d.checkReplaces()...)
		}
	}
	c, err := New(domains...)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	if c.Files == nil {
		c.Files = []string{}
	}
	return c, nil
}

// ruleFile is a file Load reads, with its size when listed.
type ruleFile struct {
	name string
	size int64
}

// ruleFiles returns the files Load reads for path, and the problems of the
// entries it set aside: links to nowhere and files that are not regular.
// Its error is that of path itself, which stops the load.
func ruleFiles(path string) ([]ruleFile, []error, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return nil, nil, notRegular(path, info.Mode())
		}
		return []ruleFile{{path, info.Size()}}, nil, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	var files []ruleFile
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		if ext := filepath.Ext(name); ext != ".yaml" && ext != ".yml" {
			continue
		}
		file := filepath.Join(path, name)
		info, err := os.Stat(file) // follows a ConfigMap's symbolic links
		if err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
			continue
		}
		switch {
		case info.IsDir():
		case info.Mode().IsRegular():
			files = append(files, ruleFile{file, info.Size()})
		default:
			errs = append(errs, notRegular(file, info.Mode()))
		}
	}
	return files, errs, nil
}

// readRuleFile reads the regular file name, of at most max bytes. It opens
// it without blocking (openFlags), so that a named pipe put in its place
// since it was listed is refused rather than waited on.
func readRuleFile(name string, max int64) ([]byte, error) {
	f, err := os.OpenFile(name, openFlags, 0)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !info.Mode().IsRegular() {
		return nil, notRegular(name, info.Mode())
	}
	if info.Size() > max {
		return nil, tooLarge(name, info.Size(), max)
	}
	// As os.ReadFile, but reading no more than max+1 bytes whatever the
	// file grows to.
	data := make([]byte, 0, info.Size()+1)
	r := io.LimitReader(f, max+1)
	for {
		n, err := r.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", &fs.PathError{Op: "read", Path: name, Err: err})
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
	if int64(len(data)) > max {
		return nil, tooLarge(name, int64(len(data)), max)
	}
	return data, nil
}

func notRegular(name string, mode fs.FileMode) error {
	what := "irregular"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		what = "a named pipe"
	case mode&fs.ModeSocket != 0:
		what = "a socket"
	case mode&fs.ModeDevice != 0:
		what = "a device"
	}
	return &Error{File: name, Msg: fmt.Sprintf("not a regular file (%s): only regular files are read", what), Err: ErrNotRegular}
}

func tooLarge(name string, size, max int64) error {
	return &Error{File: name, Msg: fmt.Sprintf("%d bytes or more, above the cap of %d bytes for one file", size, max), Err: ErrTooLarge}
}

func totalTooLarge(name string, max int64) error {
	return &Error{File: name, Msg: fmt.Sprintf("with this file, the rule files hold more than %d bytes, the cap for all of them", max), Err: ErrTooLarge}
}
