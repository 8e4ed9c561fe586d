package server

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redlimit/redlimit"
)

// A refund after a denial that failed for good (the store's refund error
// handler, fired by redisstore's Cluster fault tests) is counted in
// redlimit_refund_failures_total and logged with what it was for.
func TestRefundFailedCountsAndLogs(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	s := &Server{log: slog.New(slog.NewTextHandler(logs, nil))}
	reg := prometheus.NewRegistry()
	failures, err := registerRefundMetric(reg)
	if err != nil {
		t.Fatal(err)
	}
	handle := s.refundFailed(failures)
	reqs := []redlimit.Request{{Key: "a", Limit: redlimit.PerHour(10), Cost: 1}, {Key: "b", Limit: redlimit.PerHour(10), Cost: 1}}
	handle(context.Background(), reqs, errors.New("NOREPLICAS"))
	handle(context.Background(), reqs[:1], errors.New("i/o timeout"))
	if got := testutil.ToFloat64(failures); got != 2 {
		t.Errorf("redlimit_refund_failures_total = %v, want 2", got)
	}
	for _, want := range []string{"limits=2", "NOREPLICAS", "limits=1", "i/o timeout"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}
