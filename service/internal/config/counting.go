package config

import "fmt"

// Counting says how a limit counts the hits of a request that does not
// fit: whether they are dropped (an admission) or recorded all the same (a
// debit). A rule's counting is its own (rate_limit.counting), else its
// file's (counting at the top), else the service's (rls.Options.Counting,
// the --counting flag), else [CountingAuto].
type Counting uint8

const (
	// CountingDefault, the zero value, says nothing: the file's, or the
	// service's, counting applies.
	CountingDefault Counting = iota
	// CountingAuto counts a descriptor that carries its own hits_addend as
	// a debit, and any other as an admission. Envoy sets a descriptor's
	// hits_addend from a route's rate limit hits_addend. The
	// check-then-debit flow of cost budgets (LLM tokens, bytes) reports a
	// cost measured after the work that way (apply_on_stream_done). So
	// such a debit is recorded even when it takes the key over its limit.
	// Plain requests keep redlimit's "a denied request consumes nothing".
	// A hits_addend of 0 (a check) consumes nothing whatever the counting.
	CountingAuto
	// CountingAdmission counts every request as an admission: one that
	// does not fit is denied and consumes nothing, so a client that keeps
	// retrying while denied does not push its own limit further away.
	CountingAdmission
	// CountingDebit counts every hit, as envoyproxy/ratelimit does. A
	// request that does not fit is answered OVER_LIMIT, and its hits are
	// recorded all the same. That may take the key into debt. Later
	// requests are then denied until the debt has drained.
	CountingDebit
)

var countingNames = [...]string{"", "auto", "admission", "debit"}

// String returns the counting's name in a rule file: "auto", "admission"
// or "debit"; "" for CountingDefault.
func (c Counting) String() string {
	if int(c) < len(countingNames) {
		return countingNames[c]
	}
	return fmt.Sprintf("Counting(%d)", uint8(c))
}

// ParseCounting returns the counting named s: "auto", "admission" or
// "debit".
func ParseCounting(s string) (Counting, error) {
	for i, name := range countingNames {
		if i > 0 && s == name {
			return Counting(i), nil
		}
	}
	return 0, fmt.Errorf("config: unknown counting %q (want %s)", s, countingList)
}

const countingList = "auto, admission, debit"

// MarshalText returns the counting's name.
func (c Counting) MarshalText() ([]byte, error) {
	if c == CountingDefault || int(c) >= len(countingNames) {
		return nil, fmt.Errorf("config: no name for counting %d", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText sets c to the counting named text.
func (c *Counting) UnmarshalText(text []byte) error {
	v, err := ParseCounting(string(text))
	if err != nil {
		return err
	}
	*c = v
	return nil
}
