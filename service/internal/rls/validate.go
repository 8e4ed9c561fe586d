package rls

import (
	"fmt"
	"strings"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/service/internal/config"
)

// validate checks req against the caps. It needs a domain, and
// 1..MaxDescriptors descriptors of 1..MaxEntries entries each. No key may
// be empty. The domain, keys and values together hold at most MaxBytes.
// It checks every descriptor's hits_addend (at most redlimit.MaxCost) and
// limit override (see checkOverride), whether or not a rule applies to
// it. Errors wrap [ErrInvalidRequest], and name the descriptor and entry
// by index.
func (s *Service) validate(req *pb.RateLimitRequest) error {
	if req == nil {
		return fmt.Errorf("%w: no request", ErrInvalidRequest)
	}
	if req.Domain == "" {
		return fmt.Errorf("%w: empty domain", ErrInvalidRequest)
	}
	n := len(req.Descriptors)
	if n == 0 {
		return fmt.Errorf("%w: no descriptors", ErrInvalidRequest)
	}
	if n > s.opts.MaxDescriptors {
		return fmt.Errorf("%w: %d descriptors, at most %d", ErrInvalidRequest, n, s.opts.MaxDescriptors)
	}
	size := len(req.Domain)
	for i, d := range req.Descriptors {
		if d == nil || len(d.Entries) == 0 {
			return fmt.Errorf("%w: descriptor %d has no entries", ErrInvalidRequest, i)
		}
		if len(d.Entries) > s.opts.MaxEntries {
			return fmt.Errorf("%w: descriptor %d has %d entries, at most %d", ErrInvalidRequest, i, len(d.Entries), s.opts.MaxEntries)
		}
		for j, e := range d.Entries {
			if e == nil || e.Key == "" {
				return fmt.Errorf("%w: descriptor %d, entry %d: empty key", ErrInvalidRequest, i, j)
			}
			size += len(e.Key) + len(e.Value)
		}
		if d.HitsAddend != nil && d.HitsAddend.Value > redlimit.MaxCost {
			return fmt.Errorf("%w: descriptor %d: hits_addend %d is above %d", ErrInvalidRequest, i, d.HitsAddend.Value, int64(redlimit.MaxCost))
		}
		if d.Limit != nil {
			if err := s.checkOverride(d.Limit, i); err != nil {
				return err
			}
		}
		if size > s.opts.MaxBytes {
			return fmt.Errorf("%w: the domain, keys and values hold more than %d bytes", ErrInvalidRequest, s.opts.MaxBytes)
		}
	}
	return nil
}

// checkOverride checks the limit override of descriptor i: that the
// policy takes overrides, and its period. What depends on the rule it
// matches is checked by checkOverrideRule.
func (s *Service) checkOverride(o *rlpb.RateLimitDescriptor_RateLimitOverride, i int) error {
	if s.opts.Overrides == OverridesRefuse {
		return fmt.Errorf("%w: descriptor %d: limit overrides are not accepted by this service", ErrInvalidRequest, i)
	}
	_, period, err := overridePeriod(o, i)
	if err != nil {
		return err
	}
	if period > s.opts.MaxOverridePeriod {
		return fmt.Errorf("%w: descriptor %d: limit override %d per %s: the period is above %s, the longest an override may have",
			ErrInvalidRequest, i, o.RequestsPerUnit, period, s.opts.MaxOverridePeriod)
	}
	return nil
}

// overridePeriod returns the unit name and the period of the limit
// override of descriptor i, and checks it. The unit must be known, and
// requests_per_unit above 0. The unit_multiplier (1 when unset) must keep
// the period within redlimit.MaxPeriod.
func overridePeriod(o *rlpb.RateLimitDescriptor_RateLimitOverride, i int) (string, time.Duration, error) {
	name := strings.ToLower(o.Unit.String())
	unit, ok := config.Units[name]
	if !ok {
		return "", 0, fmt.Errorf("%w: descriptor %d: limit override: unknown unit %s", ErrInvalidRequest, i, o.Unit)
	}
	if o.RequestsPerUnit == 0 {
		return "", 0, fmt.Errorf("%w: descriptor %d: limit override: requests_per_unit is 0", ErrInvalidRequest, i)
	}
	mult := uint32(1)
	if o.UnitMultiplier != nil {
		mult = o.UnitMultiplier.Value
	}
	if most := int64(redlimit.MaxPeriod / unit); mult == 0 || int64(mult) > most {
		return "", 0, fmt.Errorf("%w: descriptor %d: limit override: unit_multiplier %d is not in 1..%d", ErrInvalidRequest, i, mult, most)
	}
	return name, time.Duration(mult) * unit, nil
}
