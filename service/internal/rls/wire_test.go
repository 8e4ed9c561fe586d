package rls

import (
	"errors"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// CheckWire refuses, before decoding, what the caps would refuse after, and
// what does not parse (the decoder would allocate what comes before the
// fault: 31,449 empty descriptors then a bad byte cost 4.3 MB), and passes
// what they accept.
func TestCheckWire(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Options{MaxDescriptors: 3, MaxEntries: 2})
	descs := func(n, m int) []*rlpb.RateLimitDescriptor {
		var ds []*rlpb.RateLimitDescriptor
		for range n {
			d := &rlpb.RateLimitDescriptor{Limit: &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1}}
			for range m {
				d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: "k", Value: "v"})
			}
			ds = append(ds, d)
		}
		return ds
	}
	for _, tc := range []struct {
		name string
		msg  []byte
		want string // "" for none
	}{
		{"within the caps", mustMarshal(t, &pb.RateLimitRequest{Domain: "d", Descriptors: descs(3, 2), HitsAddend: 3}), ""},
		{"a descriptor too many", mustMarshal(t, &pb.RateLimitRequest{Domain: "d", Descriptors: descs(4, 1)}), "more than 3 descriptors"},
		{"an entry too many", mustMarshal(t, &pb.RateLimitRequest{Domain: "d", Descriptors: append(descs(1, 2), descs(1, 3)...)}), "descriptor 1 has 3 entries, at most 2"},
		{"empty descriptors", []byte(strings.Repeat("\x12\x00", 1000)), "more than 3 descriptors"},
		{"empty descriptors, then a fault", append([]byte(strings.Repeat("\x12\x00", 1000)), 0xff), "more than 3 descriptors"},
		{"a fault after what the caps take", append(mustMarshal(t, &pb.RateLimitRequest{Domain: "d", Descriptors: descs(1, 1)}), 0xff), "not valid protobuf"},
		{"empty entries", append([]byte("\x12\xd0\x0f"), []byte(strings.Repeat("\x0a\x00", 1000))...), "descriptor 0 has 1000 entries, at most 2"},
		{"malformed", []byte{0x12, 0x05, 0x0a}, "not valid protobuf"},
		{"a bad tag", []byte{0xff}, "not valid protobuf"},
		{"empty", nil, ""},
	} {
		err := f.svc.CheckWire(tc.msg)
		if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkPrecheck is what the prechecks save on the worst message within
// the default size cap (128 KiB of empty descriptors): counting it on the
// wire, or in JSON, against decoding it, which the caps then refuse.
func BenchmarkPrecheck(b *testing.B) {
	svc := newFuzzService(b)
	wire := []byte(strings.Repeat("\x12\x00", 64<<10))
	body := []byte(`{"domain":"d","descriptors":[` + strings.Repeat("{},", 43<<10) + `{}]}`)
	for _, bc := range []struct {
		name string
		run  func()
	}{
		{"wire/count", func() { svc.CheckWire(wire) }},
		{"wire/decode", func() { proto.Unmarshal(wire, &pb.RateLimitRequest{}) }},
		{"json/count", func() { jsonObjects(body) }},
		{"json/decode", func() { protojson.Unmarshal(body, &pb.RateLimitRequest{}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.run()
			}
		})
	}
}
