package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/redlimit/redlimit/internal/redistest"
)

// envoyShared are rules of envoyproxy/ratelimit's features whose point is
// sharing: a share_threshold wildcard, quotas with metadata, and one
// domain in two files. Sliding logs, which are exact across instances
// whenever the requests come.
var envoyShared = map[string]string{
	"storage.yaml": `domain: storage
algorithm: sliding_log
descriptors:
  - key: object
    value: docs/*
    share_threshold: true
    value_to_metric: true
    rate_limit: {unit: hour, requests_per_unit: 30}
  - key: object
    value: tmp/*
    rate_limit: {unit: hour, requests_per_unit: 2}
`,
	"llm.yaml": `domain: llm
algorithm: sliding_log
descriptors:
  - key: backend
    value: east
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata: {upstream: {name: east}}
  - key: backend
    value: west
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
    metadata: {upstream: {name: west}}
  - key: window
    rate_limit: {unit: second, unit_multiplier: 30, requests_per_unit: 5}
`,
	"catalog_read.yaml": `domain: catalog
algorithm: sliding_log
descriptors:
  - key: verb
    value: GET
    rate_limit: {name: reads, unit: hour, requests_per_unit: 3}
`,
	"catalog_write.yaml": `domain: catalog
algorithm: sliding_log
descriptors:
  - key: admin
    descriptors:
      - key: verb
        value: GET
        rate_limit: {unit: hour, requests_per_unit: 4, replaces: [{name: reads}]}
`,
}

// TestEnvoySharingE2E runs three instances of the built binary on one
// Redis, with --merge-domains and --response-dynamic-metadata, and checks
// the envoyproxy/ratelimit features that are about sharing: every value a
// share_threshold wildcard matches counts against one limit, exactly,
// across the instances; quotas spent through one instance route the next
// check, on another, to the backend with room (named in the dynamic
// metadata); and the files of one domain are merged, a rule of one
// replacing a rule of the other.
func TestEnvoySharingE2E(t *testing.T) {
	t.Parallel()
	redis := redistest.Start(t)
	dir := t.TempDir()
	for name, data := range envoyShared {
		writeFile(t, filepath.Join(dir, name), data)
	}
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, "--config="+dir, "--redis=redis://"+redis.Addr(), "--timeout=10s",
			"--merge-domains", "--response-dynamic-metadata"))
	}
	ctx := context.Background()

	// share_threshold: 16 workers per instance, each on its own object,
	// admit exactly the shared 30; without it, each value its own 2.
	const workers, perWorker = 16, 4
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for pi, p := range procs {
		for w := range workers {
			wg.Go(func() {
				for i := range perWorker {
					resp, err := p.ask(ctx, "storage", desc("object", fmt.Sprintf("docs/%d-%d-%d.pdf", pi, w, i)))
					if err != nil {
						t.Errorf("instance %d: %v", pi, err)
						return
					}
					if resp.OverallCode == pb.RateLimitResponse_OK {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := admitted.Load(); n != 30 {
		t.Errorf("docs/*: %d admitted of %d, want exactly the shared 30", n, 3*workers*perWorker)
	}
	for i, p := range procs {
		if resp, err := p.ask(ctx, "storage", desc("object", "tmp/"+fmt.Sprint(i))); err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
			t.Errorf("tmp/%d, its own limit: %v %v", i, resp, err)
		}
	}
	// The metrics name the pattern, not the values. An instance that
	// allowed none has no such series (metric: -1).
	var shared float64
	for _, p := range procs {
		shared += max(0, p.metric(`redlimit_rls_decisions_total{domain="storage",outcome="allowed",rule="storage.object_docs/*"}`))
	}
	if shared != 30 {
		t.Errorf("metric of the shared rule: %v allowed, want 30", shared)
	}

	// Quotas: check (hits_addend 0) on one instance, serve on another.
	check := func(p *proc) (*pb.RateLimitResponse, string) {
		t.Helper()
		zero := func(d *rlpb.RateLimitDescriptor) *rlpb.RateLimitDescriptor {
			d.HitsAddend = wrapperspb.UInt64(0)
			return d
		}
		resp, err := p.ask(ctx, "llm", zero(desc("backend", "east")), zero(desc("backend", "west")))
		if err != nil {
			t.Fatal(err)
		}
		name := resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().GetFields()["upstream"].GetStructValue().GetFields()["name"].GetStringValue()
		return resp, name
	}
	if resp, name := check(procs[0]); resp.OverallCode != pb.RateLimitResponse_OK || name != "east" {
		t.Fatalf("both with room: %v, routed to %q", resp.OverallCode, name)
	}
	if resp, err := procs[1].ask(ctx, "llm", desc("backend", "east")); err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
		t.Fatalf("served by east: %v %v", resp, err)
	}
	if resp, name := check(procs[2]); resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].Code != pb.RateLimitResponse_OVER_LIMIT || name != "west" {
		t.Fatalf("east spent: %v %v, routed to %q; want OK for west", resp.OverallCode, resp.Statuses, name)
	}
	procs[0].ask(ctx, "llm", desc("backend", "west"))
	if resp, name := check(procs[1]); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT || name != "" {
		t.Fatalf("both spent: %v, routed to %q; want OVER_LIMIT", resp.OverallCode, name)
	}
	if resp, err := procs[2].ask(ctx, "llm", desc("window", "w")); err != nil || resp.Statuses[0].CurrentLimit.GetUnitMultiplier().GetValue() != 30 {
		t.Errorf("2 per 30 seconds: %v %v", resp, err)
	}

	// One domain in two files: the admin rule replaces the reads rule,
	// whichever instance answers.
	for i := range 4 {
		p := procs[i%3]
		resp, err := p.ask(ctx, "catalog", desc("verb", "GET"), desc("admin", "a", "verb", "GET"))
		if err != nil || resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].CurrentLimit != nil {
			t.Fatalf("admin request %d: %v %v", i, resp, err)
		}
	}
	if resp, _ := procs[0].ask(ctx, "catalog", desc("verb", "GET"), desc("admin", "a", "verb", "GET")); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("the admin rule's 4 spent: %v", resp.OverallCode)
	}
	for i := range 3 {
		if resp, _ := procs[i].ask(ctx, "catalog", desc("verb", "GET")); resp.OverallCode != pb.RateLimitResponse_OK {
			t.Errorf("reads, untouched by the replacing rule, request %d: %v", i, resp.OverallCode)
		}
	}
	if resp, _ := procs[1].ask(ctx, "catalog", desc("verb", "GET")); resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("reads spent: %v", resp.OverallCode)
	}

	// A debit (auto counting: a descriptor's own hits_addend) is counted
	// over the limit, as envoyproxy/ratelimit counts: 5 of 2 answer
	// OVER_LIMIT, and the next check on another instance is denied.
	d := desc("object", "tmp/debit")
	d.HitsAddend = wrapperspb.UInt64(5)
	if resp, err := procs[0].ask(ctx, "storage", d); err != nil || resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("a debit of 5 on a limit of 2: %v %v, want OVER_LIMIT", resp, err)
	}
	peek := desc("object", "tmp/debit")
	peek.HitsAddend = wrapperspb.UInt64(0)
	if resp, err := procs[1].ask(ctx, "storage", peek); err != nil || resp.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("a check after the debit: %v %v, want OVER_LIMIT", resp, err)
	}
}
