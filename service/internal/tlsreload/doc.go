// Package tlsreload keeps a server's TLS identity in step with the PEM
// files that hold it, without a restart. The identity is its certificate
// and key, and the CA certificates its clients' certificates must chain
// to.
//
// A [Reloader] loads the files once. In [New], a file that does not load
// is its error. It hands out [tls.Config] values ([Reloader.TLSConfig]).
// Their handshakes always use what was loaded last. [Reloader.Watch]
// watches the files and loads them again after a change, however the
// change is made. A file may be written in place, renamed over, or swapped
// behind a symbolic link anywhere on its path (package fswatch).
// Kubernetes does that when it updates a mounted Secret: the "..data" link
// is renamed to a new directory. A release switch does it too.
// [Reloader.Reload] loads them on demand (SIGHUP).
//
// A load may fail: a file missing, unreadable or not PEM, a truncated
// chain, a key that does not match the certificate, a certificate whose
// validity has ended, a CA file without a certificate. Then nothing
// changes. The identity in use keeps serving, and the failure is logged
// and counted ([Reloader.Stats]). A new handshake takes the new identity.
// Connections already open keep the one they were made with.
package tlsreload
