// Package version tells which build of redlimit is running.
//
// A release sets Version and Revision with -ldflags:
//
//	-X github.com/redlimit/redlimit/service/internal/version.Version=v0.1.0
//	-X github.com/redlimit/redlimit/service/internal/version.Revision=<commit>
//
// Otherwise Get reads them from the build info: the module's version under
// go install module@version, and the VCS revision when built in a checkout.
package version

import (
	"fmt"
	"runtime/debug"
)

// Set by -ldflags at release; empty otherwise.
var (
	Version  string
	Revision string
)

// Info is what a build reports about itself.
type Info struct {
	Version   string // a module version such as v0.1.0, or "(devel)"
	Revision  string // the commit, with "-dirty" if the tree had changes; "unknown" if not recorded
	GoVersion string // the Go toolchain that built it
}

// String is the line that redlimit version prints.
func (i Info) String() string {
	return fmt.Sprintf("redlimit %s (commit %s, %s)", i.Version, i.Revision, i.GoVersion)
}

// Get returns the running build's Info.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{}
	}
	return fromBuildInfo(bi, Version, Revision)
}

// fromBuildInfo fills Info from bi, preferring the values set by -ldflags.
func fromBuildInfo(bi *debug.BuildInfo, version, revision string) Info {
	i := Info{Version: version, Revision: revision, GoVersion: bi.GoVersion}
	if i.Version == "" {
		i.Version = bi.Main.Version
	}
	if i.Version == "" {
		i.Version = "(devel)"
	}
	if i.Revision == "" {
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if i.Revision != "" && dirty {
			i.Revision += "-dirty"
		}
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	if i.GoVersion == "" {
		i.GoVersion = "unknown"
	}
	return i
}
