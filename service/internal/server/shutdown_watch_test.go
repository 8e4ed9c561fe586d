package server

import (
	"context"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A client watching the gRPC health service (Watch, a stream that lasts
// until its client ends it, as grpc-go's client-side health checking
// opens) does not hold up the shutdown: the RPCs in flight finish and the
// server stops at once, not at the shutdown timeout, which would also cut
// off whatever else is still running then ("Termination and draining",
// docs/OPERATIONS.md).
func TestShutdownNotHeldByHealthWatch(t *testing.T) {
	t.Parallel()
	// Long: a slow shutdown on a busy machine is told from one held to it.
	const shutdownTimeout = 10 * time.Second
	r := start(t, Options{ShutdownTimeout: shutdownTimeout})
	stream, err := healthpb.NewHealthClient(r.conn).Watch(context.Background(), &healthpb.HealthCheckRequest{Service: rlsService})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Watch: %v, %v", m, err)
	}
	begin := time.Now()
	r.cancel()
	var err2 error
	select {
	case err2 = <-r.done:
		r.done <- err2
	case <-time.After(3 * shutdownTimeout):
		t.Fatal("Run did not return")
	}
	took := time.Since(begin)
	if took > shutdownTimeout/2 || strings.Contains(r.logs.String(), "cut off") {
		t.Fatalf("shutdown took %v with a health Watch open (shutdown timeout %v); logs:\n%s", took, shutdownTimeout, r.logs.String())
	}
}
