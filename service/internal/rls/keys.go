package rls

import (
	"strconv"
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/redlimit/redlimit/service/internal/config"
)

// descriptorKey returns the key the limit of a descriptor is kept under.
// It holds the domain and every entry's key and value, each prefixed by
// its length in bytes. So no two different descriptors share a key,
// however their strings hold ':', ';' or '=':
//
//	3:api;14:remote_address=8:10.0.0.1
//
// The separators only make it readable. The limit's algorithm and period
// are not part of it: the store keeps one state per key, algorithm and
// period (redlimit.StateID).
//
// path holds the descriptors the entries went through (config.MatchPath),
// or nil. One may share its threshold (share_threshold). Its wildcard
// pattern then stands for the entry's value (config.Descriptor.KeyValue).
// So every value it matches has one key, as in envoyproxy/ratelimit.
func descriptorKey(domain string, entries []*rlpb.RateLimitDescriptor_Entry, path []*config.Descriptor) string {
	if len(path) != len(entries) {
		path = nil
	}
	var b strings.Builder
	n := len(domain) + 8
	for _, e := range entries {
		n += len(e.Key) + len(e.Value) + 16
	}
	b.Grow(n)
	writeString(&b, domain)
	for i, e := range entries {
		v := e.Value
		if path != nil {
			v = path[i].KeyValue(v)
		}
		b.WriteByte(';')
		writeString(&b, e.Key)
		b.WriteByte('=')
		writeString(&b, v)
	}
	return b.String()
}

// writeString writes s prefixed by its length and ':'.
func writeString(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}
