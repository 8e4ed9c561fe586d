package server

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// liveHeap returns the bytes of live heap objects after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// stillAnswers checks that the server answers a new client.
func stillAnswers(t *testing.T, r *running) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: "1"}}}}}
	if _, err := r.client.ShouldRateLimit(ctx, req); err != nil {
		t.Fatalf("the service does not answer during the attack: %v", err)
	}
}

// Finding 10: two connections of 200 streams each, every one declaring the
// largest message the server takes and sending all of it but the last
// byte, held the whole of it: 2 x 200 x 1 MiB, heap 9 -> 412 MB. The
// server must bound what a client can make it hold. (Not parallel: it
// measures the heap of the whole test binary.)
func TestGRPCHalfSentStreams(t *testing.T) {
	r := start(t, Options{})
	length := r.opts.MaxMessageBytes
	before := liveHeap()
	var as []*h2Attacker
	sent := 0
	for range 2 {
		a := dialH2(t, r.GRPCAddr())
		as = append(as, a)
		for range 200 {
			sent += a.fill(a.open(length), length-1, 16<<10, 200*time.Millisecond)
		}
	}
	stillAnswers(t, r)
	grew := liveHeap() - before
	streams := heldStreams(as)
	t.Logf("%d streams held, %d bytes sent; the heap grew by %.1f MiB", streams, sent, float64(grew)/(1<<20))
	// The defaults allow 2 x 100 streams of 64 KiB: about 13 MiB.
	if grew > 64<<20 {
		t.Fatalf("heap grew by %.0f MiB holding %d half-sent streams, want under 64 MiB", float64(grew)/(1<<20), streams)
	}
}

// Sent as DATA frames of one byte, a message costs grpc-go 20 to 40 bytes
// of heap per byte (each frame is a buffer of its own until the message is
// complete): 16 streams of 64 KiB held 20 MiB. The cap on bytes held
// counts what the frames cost and closes the connection that holds the
// most once it is passed. (Not parallel: it measures the heap.)
func TestGRPCTinyFrames(t *testing.T) {
	const maxHeld = 2 << 20
	r := start(t, Options{MaxMessageBytes: 64 << 10, GRPCMaxPendingBytes: maxHeld})
	before, cpu := liveHeap(), processCPU()
	a := dialH2(t, r.GRPCAddr())
	a.paced = true
	sent := 0
	// Waits as long as a loaded machine may take to open the window: the
	// test needs the frames sent, and the guard's shedding ends the waits.
	for range 16 {
		id := a.open(64 << 10)
		sent += a.fill(id, 64<<10-1, 1, 5*time.Second)
	}
	grew := liveHeap() - before
	t.Logf("sent %d one-byte frames; the heap grew by %.1f MiB; %v of CPU (both sides)", sent, float64(grew)/(1<<20), processCPU()-cpu)
	if grew > 4*maxHeld {
		t.Fatalf("heap grew by %.0f MiB for %d one-byte frames, want under %d MiB", float64(grew)/(1<<20), sent, 4*maxHeld>>20)
	}
	waitFor(t, "the connection closed", a.ended)
	stillAnswers(t, r)
}

// heldStreams counts the streams of as that the server has not reset.
func heldStreams(as []*h2Attacker) int {
	n := 0
	for _, a := range as {
		a.mu.Lock()
		for id := range a.winOf {
			if !a.reset[id] {
				n++
			}
		}
		a.mu.Unlock()
	}
	return n
}

// smallRequest is a valid ShouldRateLimit request message for domain web.
func smallRequest(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(&pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: "1"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitSteady waits until the series stops changing for 300 ms, and returns
// its value.
func waitSteady(t *testing.T, r *running, series string) float64 {
	t.Helper()
	last, since := r.metric(t, series), time.Now()
	waitFor(t, series+" steady", func() bool {
		if v := r.metric(t, series); v != last {
			last, since = v, time.Now()
		}
		return time.Since(since) > 300*time.Millisecond
	})
	return last
}

// A client that reads no answer (its window 0) keeps every stream it
// opened, each with its header fields, until the connection's maximum age:
// 1,000 such streams on one connection, each with 200 header fields,
// held 16 MiB. The server takes GRPCMaxStreams of them per connection.
// (Not parallel: it measures the heap.)
func TestGRPCUnreadAnswers(t *testing.T) {
	r := start(t, Options{})
	msg := smallRequest(t)
	var pad []hpack.HeaderField
	for i := range 200 {
		pad = append(pad, hpack.HeaderField{Name: fmt.Sprintf("x%d", i), Sensitive: true})
	}
	before := liveHeap()
	a := dialH2(t, r.GRPCAddr())
	a.write(func() error { return a.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}) })
	for range 1000 {
		a.request(a.headers(pad), msg)
	}
	a.flush()
	answered := waitSteady(t, r, `redlimit_rls_requests_total{answer="ok"}`)
	grew := liveHeap() - before
	t.Logf("%v requests decided, %d streams held; the heap grew by %.1f MiB", answered, heldStreams([]*h2Attacker{a}), float64(grew)/(1<<20))
	if grew > 6<<20 {
		t.Fatalf("heap grew by %.1f MiB for streams whose answers are not read, want under 6 MiB", float64(grew)/(1<<20))
	}
	stillAnswers(t, r)
}

// grpc-go bounds the streams of one connection, not of all: 16 connections,
// each with GRPCMaxStreams streams whose answers are not read, each with 200
// header fields, held 27 MiB. The guard counts streamCost for each open
// stream, so GRPCMaxPendingBytes bounds them. (Not parallel: it measures
// the heap.)
func TestGRPCUnreadAnswersAcrossConnections(t *testing.T) {
	const maxHeld = 4 << 20
	r := start(t, Options{GRPCMaxPendingBytes: maxHeld})
	msg := smallRequest(t)
	var pad []hpack.HeaderField
	for i := range 200 {
		pad = append(pad, hpack.HeaderField{Name: fmt.Sprintf("x%d", i), Sensitive: true})
	}
	before, cpu := liveHeap(), processCPU()
	var as []*h2Attacker
	for range 16 {
		a := dialH2(t, r.GRPCAddr())
		as = append(as, a)
		a.write(func() error { return a.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}) })
		for range DefaultGRPCMaxStreams {
			a.request(a.headers(pad), msg)
		}
		a.flush()
	}
	waitSteady(t, r, `redlimit_rls_requests_total{answer="ok"}`)
	grew := liveHeap() - before
	shed := 0
	for _, a := range as {
		if a.ended() {
			shed++
		}
	}
	t.Logf("%d of %d connections closed; the heap grew by %.1f MiB; %v of CPU (both sides)", shed, len(as), float64(grew)/(1<<20), processCPU()-cpu)
	if grew > 3*maxHeld {
		t.Fatalf("heap grew by %.1f MiB for streams whose answers are not read, want under %d MiB", float64(grew)/(1<<20), 3*maxHeld>>20)
	}
	stillAnswers(t, r)
}

// Past GRPCMaxPendingBytes, the connection whose streams hold the most is
// closed, and the others keep being served; the count returns to zero
// once its streams are gone.
func TestGRPCHeldBytesCap(t *testing.T) {
	t.Parallel()
	r := start(t, Options{GRPCMaxPendingBytes: 1 << 20})
	stillAnswers(t, r)
	a := dialH2(t, r.GRPCAddr())
	a.write(func() error { return a.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}) })
	msg := smallRequest(t)
	for range 100 {
		a.request(a.headers(nil), msg)
	}
	a.flush()
	waitFor(t, "the connection shed", a.ended)
	if got := r.metric(t, "redlimit_grpc_connections_shed_total"); got < 1 {
		t.Fatalf("redlimit_grpc_connections_shed_total = %v", got)
	}
	stillAnswers(t, r)
	waitFor(t, "nothing held", func() bool { return r.metric(t, "redlimit_grpc_pending_bytes") == 0 })
	if !strings.Contains(r.logs.String(), "the bytes held passed the cap") {
		t.Fatalf("no log of the shedding in\n%s", r.logs)
	}
}

// The guard counts a stream from the client's HEADERS to the frame that
// ends it: after answered requests, refused and reset ones, streams
// (reflection) and a health check, on a connection still open, it holds
// nothing.
func TestGRPCGuardCountsToZero(t *testing.T) {
	t.Parallel()
	r := start(t, Options{MaxMessageBytes: 4 << 10})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "web", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "ip", Value: "1"}}}}})
			}
		})
	}
	wg.Wait()
	// Over the message cap: ResourceExhausted, the stream reset by the server.
	big := &pb.RateLimitRequest{Domain: strings.Repeat("d", 8<<10), Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k"}}}}}
	if _, err := r.client.ShouldRateLimit(context.Background(), big); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a message over the cap: %v", err)
	}
	// Invalid: InvalidArgument.
	if _, err := r.client.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an empty request: %v", err)
	}
	// Cancelled before the server could answer (the client resets it).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.client.ShouldRateLimit(ctx, big)
	if _, err := healthpb.NewHealthClient(r.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(r.conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("reflection stream end: %v", err)
	}
	// A raw client: a stream half-sent and then reset, one refused past the
	// stream cap is not needed here; one ended with its headers.
	a := dialH2(t, r.GRPCAddr())
	id := a.open(1000)
	a.write(func() error { return a.fr.WriteRSTStream(id, http2.ErrCodeCancel) })
	a.write(func() error {
		a.hbuf.Reset()
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"}, {Name: ":authority", Value: "x"},
			{Name: "content-type", Value: "application/grpc"}} {
			a.enc.WriteField(f)
		}
		return a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id + 2, BlockFragment: a.hbuf.Bytes(), EndHeaders: true, EndStream: true})
	})
	a.flush()
	waitFor(t, "the headers-only stream answered", func() bool { return a.isReset(id + 2) })
	// DATA on streams the server has ended: dropped, and not followed.
	for _, ended := range []uint32{id, id + 2} {
		a.write(func() error { return a.fr.WriteData(ended, false, []byte("late")) })
	}
	a.flush()
	stillAnswers(t, r)
	waitFor(t, "nothing held", func() bool { return r.metric(t, "redlimit_grpc_pending_bytes") == 0 })
	r.guard.mu.Lock()
	for c := range r.guard.conns {
		c.mu.Lock()
		if len(c.streams) != 0 {
			t.Errorf("a connection follows %d streams, want none", len(c.streams))
		}
		c.mu.Unlock()
	}
	r.guard.mu.Unlock()
	if got := r.metric(t, "redlimit_grpc_connections"); got != 2 {
		t.Fatalf("redlimit_grpc_connections = %v, want 2", got)
	}
}

// Past GRPCMaxConnections a new connection is closed at once, counted and
// logged; one closed makes room for another.
func TestGRPCConnectionCap(t *testing.T) {
	t.Parallel()
	r := start(t, Options{GRPCMaxConnections: 3})
	stillAnswers(t, r) // r.conn is one
	a1, a2 := dialH2(t, r.GRPCAddr()), dialH2(t, r.GRPCAddr())
	waitFor(t, "three connections", func() bool { return r.metric(t, "redlimit_grpc_connections") == 3 })
	a3 := dialH2(t, r.GRPCAddr())
	waitFor(t, "the fourth connection closed", a3.ended)
	if got := r.metric(t, "redlimit_grpc_connections_refused_total"); got != 1 {
		t.Fatalf("redlimit_grpc_connections_refused_total = %v", got)
	}
	if !strings.Contains(r.logs.String(), "at the connection cap") {
		t.Fatalf("no log of the refusal in\n%s", r.logs)
	}
	if a1.ended() || a2.ended() {
		t.Fatal("a connection within the cap was closed")
	}
	a1.conn.Close()
	waitFor(t, "room again", func() bool { return r.metric(t, "redlimit_grpc_connections") == 2 })
	a4 := dialH2(t, r.GRPCAddr())
	waitFor(t, "the new connection's settings", func() bool { _, ok := a4.setting(http2.SettingMaxConcurrentStreams); return ok })
	if a4.ended() {
		t.Fatal("a connection within the cap was closed")
	}
}

// The server tells its clients its limits, and closes a connection (GOAWAY)
// at GRPCMaxConnectionAge.
func TestGRPCSettings(t *testing.T) {
	t.Parallel()
	r := start(t, Options{GRPCMaxConnectionAge: 300 * time.Millisecond})
	a := dialH2(t, r.GRPCAddr())
	waitFor(t, "the server's settings", func() bool { _, ok := a.setting(http2.SettingMaxConcurrentStreams); return ok })
	for id, want := range map[http2.SettingID]uint32{
		http2.SettingMaxConcurrentStreams: DefaultGRPCMaxStreams,
		http2.SettingInitialWindowSize:    streamWindowSize,
		http2.SettingMaxHeaderListSize:    maxHeaderListBytes,
	} {
		if got, _ := a.setting(id); got != want {
			t.Errorf("%s = %d, want %d", id, got, want)
		}
	}
	waitFor(t, "GOAWAY at the maximum age", a.gotGoAway)
}
