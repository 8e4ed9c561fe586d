package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redlimit/redlimit/service/internal/version"
)

// TestBuildInfo: redlimit_build_info is 1, labelled with the running build.
func TestBuildInfo(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := version.Get()
	for _, f := range families {
		if f.GetName() != "redlimit_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d series, want 1", len(f.GetMetric()))
		}
		m := f.GetMetric()[0]
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if m.GetGauge().GetValue() != 1 || got["version"] != want.Version || got["revision"] != want.Revision || got["goversion"] != want.GoVersion {
			t.Errorf("redlimit_build_info%v = %v, want %+v = 1", got, m.GetGauge().GetValue(), want)
		}
		return
	}
	t.Fatal("no redlimit_build_info")
}
