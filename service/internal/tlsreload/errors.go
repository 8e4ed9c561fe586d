package tlsreload

import "errors"

// ErrFile reports a certificate, key or CA file that cannot be used; the
// wrapped message names the file and why, never what it holds.
var ErrFile = errors.New("tlsreload: unusable TLS file")

// ErrClientSAN reports a client certificate, signed by a trusted CA, whose
// SANs name none of those allowed (Listener.ClientSANs).
var ErrClientSAN = errors.New("tlsreload: client certificate's SAN not allowed")
