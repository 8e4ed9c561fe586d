package httplimit

import (
	"errors"
	"fmt"

	"github.com/redlimit/redlimit/internal/ruleset"
)

var (
	// ErrNoKey is returned, wrapped, by a [KeyFunc] when its rule does not
	// apply to a request: the rule is skipped for that request. It is
	// grpclimit.ErrNoKey too.
	ErrNoKey = ruleset.ErrNoKey
	// ErrNoRules reports a middleware made without rules.
	ErrNoRules = errors.New("httplimit: no rules")
	// ErrInvalidRule reports a rule that cannot be used: a bad name, a
	// missing key function, a bad cost or too many rules. Invalid limits
	// wrap the redlimit sentinel errors instead.
	ErrInvalidRule = errors.New("httplimit: invalid rule")
)

// A KeyError reports that a rule's key, limit or cost function failed for a
// request, with an error other than [ErrNoKey]. Or it chose a bad limit or
// cost.
// [Options].OnError receives it.
type KeyError struct {
	Rule string // the rule's name
	Err  error  // what failed
}

// Error returns a message naming the rule.
func (e *KeyError) Error() string {
	return fmt.Sprintf("httplimit: rule %q: %v", e.Rule, e.Err)
}

// Unwrap returns the error of the rule's function.
func (e *KeyError) Unwrap() error { return e.Err }
