package ruleset

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlimit/redlimit"
)

// errHeldKey marks an in-flight rule's key error (see KeyFailed).
var errHeldKey = errors.New("bad key")

// KeyFailed reports whether err, from Hold, is a key function's: the
// request's fault, not the store's.
func KeyFailed(err error) bool { return errors.Is(err, errHeldKey) }

// validateHeld checks an in-flight rule.
func validateHeld[R any](k *Kind, r Rule[R]) error {
	if err := validName(k, r.Name); err != nil {
		return err
	}
	if r.Key == nil {
		return fmt.Errorf("%w: rule %q has no key function", k.ErrInvalidRule, r.Name)
	}
	if r.Limit != (redlimit.Limit{}) || r.LimitFunc != nil || r.Cost != 0 || r.CostFunc != nil || r.Shadow || r.Delay != 0 {
		return fmt.Errorf("%w: in-flight rule %q has a Limit, LimitFunc, Cost, CostFunc, Shadow or Delay", k.ErrInvalidRule, r.Name)
	}
	if err := r.InFlight.Validate(); err != nil {
		return fmt.Errorf("%s: rule %q: %w", k.Pkg, r.Name, err)
	}
	return nil
}

// Hold holds a slot of every in-flight rule of s that applies, in order,
// until release is called. A rule applies if its Route is empty or route,
// and its key function keys req. An error wrapping ErrNoKey skips the
// rule. A rule whose slots are all held denies. Its lease says when to
// retry, and the slots taken before it are released. A key function's
// other error, its panic, or an empty key returns that rule and the error
// (see KeyFailed). So does the store's error. On denial or error, release
// does nothing. If the store panics, the slots taken before are released
// and the panic goes on.
func (s *Set[R]) Hold(ctx context.Context, sem redlimit.Semaphore, req R, route string) (release func(), rule *Rule[R], l redlimit.Lease, err error) {
	var held []func()
	ok := false
	defer func() {
		if !ok {
			for _, r := range held {
				r()
			}
		}
	}()
	for i := range s.Held {
		r := &s.Held[i]
		if r.Route != "" && r.Route != route {
			continue
		}
		k, err := guard(r.Key, req)
		switch {
		case errors.Is(err, ErrNoKey):
			continue
		case err == nil && k == "":
			err = fmt.Errorf("%w: %w", errHeldKey, errEmptyKey)
		case err != nil:
			err = fmt.Errorf("%w: %w", errHeldKey, err)
		}
		var rel func()
		if err == nil {
			l, rel, err = redlimit.Hold(ctx, sem, r.Name+":"+k, r.InFlight)
		}
		if err != nil || !l.Held {
			return func() {}, r, l, err
		}
		held = append(held, rel)
	}
	ok = true
	return func() {
		for _, r := range held {
			r()
		}
	}, nil, l, nil
}
