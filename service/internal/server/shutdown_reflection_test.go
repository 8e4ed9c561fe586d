package server

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
)

// A client holding a server reflection stream open (ServerReflectionInfo,
// which lasts until its client ends it, as grpcurl or a gRPC UI keeps it)
// does not hold up the shutdown, in either version of the service: the
// server stops at once, not at the shutdown timeout, which would also cut
// off whatever else is still running then. The reflection handler, blocked
// reading the stream, does not outlive the server.
func TestShutdownNotHeldByReflection(t *testing.T) {
	t.Parallel()
	// Long: a slow shutdown on a busy machine is told from one held to it.
	const shutdownTimeout = 10 * time.Second
	for _, version := range []string{"v1", "v1alpha"} {
		t.Run(version, func(t *testing.T) {
			r := start(t, Options{ShutdownTimeout: shutdownTimeout})
			ctx, cancelStream := context.WithCancel(context.Background())
			defer cancelStream()
			var recv func() error
			switch version {
			case "v1":
				stream, err := reflectionv1.NewServerReflectionClient(r.conn).ServerReflectionInfo(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
					t.Fatal(err)
				}
				recv = func() error { _, err := stream.Recv(); return err }
			case "v1alpha":
				stream, err := reflectionv1alpha.NewServerReflectionClient(r.conn).ServerReflectionInfo(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if err := stream.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil {
					t.Fatal(err)
				}
				recv = func() error { _, err := stream.Recv(); return err }
			}
			if err := recv(); err != nil {
				t.Fatalf("list services: %v", err)
			}
			begin := time.Now()
			r.cancel()
			var err error
			select {
			case err = <-r.done:
				r.done <- err
			case <-time.After(3 * shutdownTimeout):
				t.Fatal("Run did not return")
			}
			took := time.Since(begin)
			if took > shutdownTimeout/2 || strings.Contains(r.logs.String(), "cut off") {
				t.Fatalf("shutdown took %v with a reflection stream open (shutdown timeout %v); logs:\n%s", took, shutdownTimeout, r.logs.String())
			}
			if err := recv(); err == nil {
				t.Fatal("the reflection stream goes on after the shutdown")
			}
		})
	}
	// No reflection handler is left running (blocked reading its stream).
	waitFor(t, "the reflection handlers' end", func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "reflection/internal.(*ServerReflectionServer).ServerReflectionInfo")
	})
}
