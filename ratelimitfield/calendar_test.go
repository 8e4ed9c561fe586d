package ratelimitfield_test

import (
	"testing"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// TestPolicyOfCalendar: a calendar period has no one length, so its
// policy gives no window; the RateLimit field's reset gives the instant.
func TestPolicyOfCalendar(t *testing.T) {
	p := ratelimitfield.PolicyOf("monthly", redlimit.PerCalendar(1000, redlimit.Month, "Europe/Berlin"))
	if p.Window != 0 || p.String() != `"monthly";q=1000` {
		t.Fatalf("PolicyOf = %+v (%s), want no window", p, p)
	}
}
