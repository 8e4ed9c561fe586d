package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Load reads path: a YAML file, or a directory whose *.yaml and *.yml files
// are loaded (other files and dotfiles ignored). Errors name the file, the
// line and the field.
//
// A directory is read without descending into subdirectories, in name
// order. Names starting with "." are skipped, which leaves out the
// "..data" and "..2024_01_01_..." entries of a Kubernetes ConfigMap mount,
// while its "rules.yaml -> ..data/rules.yaml" symbolic links are followed.
// Entries that are not regular files after following links (directories,
// sockets) are skipped; a link to nowhere is an error. An empty directory
// is a valid Config with no domains, under which every request is allowed.
// A path naming a file loads it whatever its name.
//
// A file that cannot be read gives its [os.PathError]; problems in the files
// give [*Error] values wrapping [ErrInvalid], every file's joined with
// [errors.Join]. Two files of one domain are an error.
func Load(path string) (*Config, error) {
	files, err := ruleFiles(path)
	if err != nil {
		return nil, err
	}
	domains := make([]*Domain, 0, len(files))
	var errs []error
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		d, err := Parse(file, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		domains = append(domains, d)
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

// ruleFiles returns the files Load reads for path.
func ruleFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var files []string
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
			return nil, fmt.Errorf("config: %w", err)
		}
		if info.Mode().IsRegular() {
			files = append(files, file)
		}
	}
	return files, nil
}
