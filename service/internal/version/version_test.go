package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name              string
		bi                debug.BuildInfo
		version, revision string
		want              Info
	}{
		{"go install at a version", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.1.0"}},
			"", "", Info{"v0.1.0", "unknown", "go1.26.0"}},
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"", "", Info{"(devel)", "abc123", "go1.26.0"}},
		{"dirty checkout", debug.BuildInfo{GoVersion: "go1.26.0", Settings: dirty},
			"", "", Info{"(devel)", "abc123-dirty", "go1.26.0"}},
		{"ldflags win", debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"v1.2.3", "def456", Info{"v1.2.3", "def456", "go1.26.0"}},
		{"nothing known", debug.BuildInfo{}, "", "", Info{"(devel)", "unknown", "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(&tt.bi, tt.version, tt.revision); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGetReportsTheTestBinary(t *testing.T) {
	i := Get()
	if i.GoVersion == "" || i.GoVersion == "unknown" {
		t.Errorf("GoVersion %q: the build info of a test binary names its toolchain", i.GoVersion)
	}
	if i.Version == "" || i.Revision == "" {
		t.Errorf("empty field in %+v", i)
	}
}
