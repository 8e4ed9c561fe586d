package rls

import (
	"fmt"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers CheckWire counts.
var (
	descriptorsField = (&pb.RateLimitRequest{}).ProtoReflect().Descriptor().Fields().ByName("descriptors").Number()
	entriesField     = (&rlpb.RateLimitDescriptor{}).ProtoReflect().Descriptor().Fields().ByName("entries").Number()
)

// CheckWire checks a RateLimitRequest in protobuf wire format against the
// caps on descriptors and entries, before it is decoded. Decoding a
// message of empty descriptors or entries allocates many times its size.
// The caps would refuse it only after (docs/SECURITY.md). CheckWire counts
// the fields without decoding them. Its errors wrap [ErrInvalidRequest] as
// [Service.Decide]'s do. A message that is not well formed is refused
// too: the decoder would allocate what comes before the fault.
func (s *Service) CheckWire(msg []byte) error {
	n := 0
	for len(msg) > 0 {
		num, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return errMalformed
		}
		msg = msg[k:]
		if num != descriptorsField || typ != protowire.BytesType {
			if k = protowire.ConsumeFieldValue(num, typ, msg); k < 0 {
				return errMalformed
			}
			msg = msg[k:]
			continue
		}
		d, k := protowire.ConsumeBytes(msg)
		if k < 0 {
			return errMalformed
		}
		msg = msg[k:]
		if e := countField(d, entriesField); e > s.opts.MaxEntries {
			return fmt.Errorf("%w: descriptor %d has %d entries, at most %d", ErrInvalidRequest, n, e, s.opts.MaxEntries)
		}
		if n++; n > s.opts.MaxDescriptors {
			return fmt.Errorf("%w: more than %d descriptors", ErrInvalidRequest, s.opts.MaxDescriptors)
		}
	}
	return nil
}

// errMalformed refuses a message that is not in protobuf's wire format,
// before the decoder allocates what comes before the fault.
var errMalformed = fmt.Errorf("%w: malformed RateLimitRequest: not valid protobuf wire format", ErrInvalidRequest)

// countField counts the fields numbered num in a message in wire format, up
// to the first that is not well formed.
func countField(msg []byte, num protowire.Number) int {
	n := 0
	for len(msg) > 0 {
		got, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return n
		}
		msg = msg[k:]
		if k = protowire.ConsumeFieldValue(got, typ, msg); k < 0 {
			return n
		}
		msg = msg[k:]
		if got == num {
			n++
		}
	}
	return n
}
