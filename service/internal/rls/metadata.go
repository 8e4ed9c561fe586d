package rls

import (
	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// setMetadata sets the response's dynamic metadata when
// Options.DynamicMetadata asks for it, as envoyproxy/ratelimit's
// RESPONSE_DYNAMIC_METADATA does. It holds the domain, and each
// descriptor's entries ("key=value"), limit override and hits_addend. It
// holds the request's hits_addend. Under "metadata" it holds the metadata
// of the rules whose descriptors passed (not OVER_LIMIT), merged in the
// request's order. p is nil when no descriptor was planned.
func (s *Service) setMetadata(req *pb.RateLimitRequest, p *plan, resp *pb.RateLimitResponse) {
	if !s.opts.DynamicMetadata {
		return
	}
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.Domain)}
	descs := make([]*structpb.Value, 0, len(req.Descriptors))
	for _, d := range req.Descriptors {
		descs = append(descs, structpb.NewStructValue(descriptorStruct(d)))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if req.HitsAddend != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(req.HitsAddend))
	}
	var passed *structpb.Struct
	if p != nil {
		for i := range p.items {
			it := &p.items[i]
			if it.metadata == nil || resp.Statuses[it.desc].Code == pb.RateLimitResponse_OVER_LIMIT {
				continue
			}
			passed = mergeMetadata(passed, it.metadata)
		}
	}
	if len(passed.GetFields()) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	resp.DynamicMetadata = &structpb.Struct{Fields: fields}
}

// descriptorStruct returns a descriptor as envoyproxy/ratelimit puts it in
// the dynamic metadata.
func descriptorStruct(d *rlpb.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.Entries))
	for _, e := range d.Entries {
		entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
	}
	fields := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if d.Limit != nil {
		fields["limit"] = structpb.NewStringValue(d.Limit.String())
	}
	if d.HitsAddend != nil {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(d.HitsAddend.GetValue()))
	}
	return &structpb.Struct{Fields: fields}
}

// mergeMetadata returns dst with the fields of src it lacks added, and the
// structs both hold merged likewise: the first rule's value of a field
// wins, as in envoyproxy/ratelimit. It never modifies src, which belongs to
// the configuration, nor any struct it took from src: a struct to merge
// into is copied first. dst may be nil.
func mergeMetadata(dst, src *structpb.Struct) *structpb.Struct {
	if dst == nil {
		return src // read only from here on: copied before any merge into it
	}
	out := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(dst.Fields)+len(src.Fields))}
	for k, v := range dst.Fields {
		out.Fields[k] = v
	}
	for k, v := range src.Fields {
		have, ok := out.Fields[k]
		switch {
		case !ok:
			out.Fields[k] = v
		case have.GetStructValue() != nil && v.GetStructValue() != nil:
			out.Fields[k] = structpb.NewStructValue(mergeMetadata(have.GetStructValue(), v.GetStructValue()))
		}
	}
	return out
}
