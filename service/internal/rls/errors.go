package rls

import "errors"

// Sentinel errors. The service wraps them with the details, so test with
// [errors.Is].
var (
	// ErrInvalidRequest reports a request the service refuses to decide:
	// an empty domain, no descriptors, a descriptor without entries, an
	// empty key, more than a cap allows, a bad limit override or hits
	// addend. gRPC answers it with InvalidArgument, /json with 400.
	ErrInvalidRequest = errors.New("rls: invalid request")
	// ErrNoConfig reports a request that arrived before any configuration
	// was loaded. gRPC answers it with Unavailable, /json with 503.
	ErrNoConfig = errors.New("rls: no configuration loaded yet")
)
