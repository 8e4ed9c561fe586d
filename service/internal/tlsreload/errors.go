package tlsreload

import "errors"

// ErrFile reports a certificate, key or CA file that cannot be used; the
// wrapped message names the file and why, never what it holds.
var ErrFile = errors.New("tlsreload: unusable TLS file")
