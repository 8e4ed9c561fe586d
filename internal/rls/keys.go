package rls

import (
	"strconv"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// descriptorKey returns the key the limit of a descriptor is kept under: the
// domain and every entry's key and value, each prefixed by its length in
// bytes, so that no two different descriptors (however their strings hold
// ':', ';' or '=') share a key:
//
//	3:api;14:remote_address=8:10.0.0.1
//
// The separators only make it readable. The limit's algorithm and period
// are not part of it: the store keeps one state per key, algorithm and
// period (redisstore adds them, hash-tagging this key).
func descriptorKey(buf []byte, domain string, entries []*rlpb.RateLimitDescriptor_Entry) []byte {
	buf = appendString(buf, domain)
	for _, e := range entries {
		buf = append(buf, ';')
		buf = appendString(buf, e.Key)
		buf = append(buf, '=')
		buf = appendString(buf, e.Value)
	}
	return buf
}

func appendString(buf []byte, s string) []byte {
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	buf = append(buf, ':')
	return append(buf, s...)
}
