package server

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redlimit/redlimit/internal/redistest"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// calendarFile holds a calendar rule of 2 a month in Berlin, after an
// ordinary one; %s is the calendar rule's rate_limit.
const calendarFile = `domain: web
descriptors:
  - key: ip
    rate_limit: {unit: hour, requests_per_unit: 5}
  - key: tenant
    rate_limit: %s
`

// TestCalendarRedis: on Redis, a calendar rule's duration_until_reset and
// X-RateLimit-Reset are the time to the 1st at midnight in Berlin, as Go
// computes it. A reload with a bad calendar rule is refused, naming the
// file, line and rule: the old rules serve on, their counts kept. A
// raised count is not denied by the deny cache; another zone counts
// afresh. The metrics and /rules serve the calendar rule.
func TestCalendarRedis(t *testing.T) {
	t.Parallel()
	redis := redistest.Shared(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	writeFile(t, path, fmt.Sprintf(calendarFile, "{unit: month, requests_per_unit: 2, time_zone: Europe/Berlin}"))
	r := start(t, Options{ConfigPath: path, RedisURL: "redis://" + redis.Addr(),
		RedisPrefix: fmt.Sprintf("cal%d:", time.Now().UnixNano()), Headers: ratelimitfield.X})

	check := func(want string, zone *time.Location) {
		t.Helper()
		before := time.Now()
		resp := r.decide(t, "tenant", "acme")
		after := time.Now()
		next := func(at time.Time) time.Duration {
			y, m, _ := at.In(zone).Date()
			return time.Date(y, m+1, 1, 0, 0, 0, 0, zone).Sub(at)
		}
		st := resp.Statuses[0]
		if got := st.Code.String(); got != want {
			t.Fatalf("code %s, want %s", got, want)
		}
		// Redis's clock is this host's: a second's margin each way.
		got := st.DurationUntilReset.AsDuration()
		if got > next(before)+time.Second || got < next(after)-time.Second {
			t.Fatalf("duration_until_reset %s, want about %s", got, next(before))
		}
		var reset string
		for _, h := range resp.ResponseHeadersToAdd {
			if h.Key == ratelimitfield.HeaderXRateLimitReset {
				reset = h.Value
			}
		}
		secs, err := strconv.ParseInt(reset, 10, 64)
		if err != nil || time.Duration(secs)*time.Second > next(before)+2*time.Second || time.Duration(secs)*time.Second < next(after)-time.Second {
			t.Fatalf("%s %q, want about %.0f", ratelimitfield.HeaderXRateLimitReset, reset, next(before).Seconds())
		}
	}
	check("OK", berlin)

	for _, tc := range []struct{ rule, want string }{
		{"{unit: month, requests_per_unit: 2, time_zone: Europe/Atlantis}", `unknown time zone: "Europe/Atlantis"`},
		{"{unit: month, requests_per_unit: 2, time_zone: Europe/Berlin, algorithm: sliding_window}", "sliding_window cannot count calendar periods"},
		{"{unit: mnoth, requests_per_unit: 2, time_zone: Europe/Berlin}", `unknown unit "mnoth"`},
		{"{unit: minute, requests_per_unit: 2, time_zone: Europe/Berlin}", "needs unit day, week, month or year"},
		{"{unit: month, requests_per_unit: 2, time_zone: ''}", "time_zone: is empty"},
		{"{unit: month, requests_per_unit: 99999999999, time_zone: Europe/Berlin}", "is above 4294967295"},
	} {
		writeFile(t, path, fmt.Sprintf(calendarFile, tc.rule))
		err := r.Reload()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "rules.yaml:6: descriptors[1].rate_limit") {
			t.Fatalf("%s: reload error %v, want %q at rules.yaml:6, descriptors[1]", tc.rule, err, tc.want)
		}
	}
	// The old rule serves on, its count kept: one left, then none.
	check("OK", berlin)
	check("OVER_LIMIT", berlin)
	check("OVER_LIMIT", berlin) // from the deny cache: the same reset
	// A raised count is asked of Redis: no month-long cached denial.
	writeFile(t, path, fmt.Sprintf(calendarFile, "{unit: month, requests_per_unit: 3, time_zone: Europe/Berlin}"))
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	check("OK", berlin)
	check("OVER_LIMIT", berlin)
	// Another zone is another state; the old one's count is kept.
	for _, step := range []struct {
		zone *time.Location
		want string
	}{{time.UTC, "OK"}, {berlin, "OVER_LIMIT"}} {
		writeFile(t, path, fmt.Sprintf(calendarFile, "{unit: month, requests_per_unit: 3, time_zone: "+step.zone.String()+"}"))
		if err := r.Reload(); err != nil {
			t.Fatal(err)
		}
		check(step.want, step.zone)
	}

	code, body := r.getBody(t, "/metrics")
	if code != 200 || !strings.Contains(body, "web.tenant") {
		t.Fatalf("/metrics: %d, no web.tenant in\n%s", code, body)
	}
	if code, body := r.getBody(t, "/rules"); code != 200 || !strings.Contains(body, `"time_zone": "Europe/Berlin"`) {
		t.Fatalf("/rules: %d\n%s", code, body)
	}
}
