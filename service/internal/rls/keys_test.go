package rls

import (
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

func TestDescriptorKey(t *testing.T) {
	t.Parallel()
	key := func(domain string, kv ...string) string {
		return descriptorKey(domain, desc(kv...).Entries, nil)
	}
	if got, want := key("api", "remote_address", "10.0.0.1"), "3:api;14:remote_address=8:10.0.0.1"; got != want {
		t.Fatalf("key %q, want %q", got, want)
	}
	// Descriptors that a joined "domain.key_value" would confuse.
	pairs := [][2]string{
		{key("a", "b", "c"), key("a", "b", "c", "", "")},
		{key("a;1:b", "c", "d"), key("a", "b", "c", "d")},
		{key("a", "b=1:c", "d"), key("a", "b", "c=1:d")},
		{key("a", "k", "v;1:x=1:y"), key("a", "k", "v", "x", "y")},
		{key("a.b", "c", "d"), key("a", "b.c", "d")},
		{key("a", "k", ""), key("a", "k", "", "k", "")},
	}
	for _, p := range pairs {
		if p[0] == p[1] {
			t.Errorf("two descriptors share the key %q", p[0])
		}
	}
	var entries []*rlpb.RateLimitDescriptor_Entry
	if got := descriptorKey("", entries, nil); got != "0:" {
		t.Fatalf("empty: %q", got)
	}
}

func TestFormatEntries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kv   []string
		want string
	}{
		{nil, ""},
		{[]string{"remote_address", "10.0.0.1"}, "remote_address=10.0.0.1"},
		{[]string{"tenant", "acme", "user", "u1"}, "tenant=acme,user=u1"},
		{[]string{"path", ""}, "path"},
		{[]string{"a", "", "b", "x=y"}, "a,b=x=y"},
	} {
		if got := FormatEntries(desc(tc.kv...).Entries); got != tc.want {
			t.Errorf("FormatEntries(%q) = %q, want %q", tc.kv, got, tc.want)
		}
	}
}
