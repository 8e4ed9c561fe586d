package loadgen

import "errors"

// Sentinel errors, wrapped with the details: test with [errors.Is].
var (
	// ErrInvalidOptions reports an [Options] field out of range, or no target.
	ErrInvalidOptions = errors.New("loadgen: invalid options")
	// ErrUnexpectedAnswer reports an answer of a rate limit service that is
	// neither OK nor OVER_LIMIT: an UNKNOWN overall code, or an HTTP status
	// other than 200 and 429.
	ErrUnexpectedAnswer = errors.New("loadgen: unexpected answer from the service")
)
