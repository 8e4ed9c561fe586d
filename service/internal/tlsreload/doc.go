// Package tlsreload keeps a server's TLS identity, its certificate and key
// and the CA certificates its clients' certificates must chain to, in step
// with the PEM files that hold them, without a restart.
//
// A [Reloader] loads the files once ([New]: a file that does not load is
// its error) and hands out [tls.Config] values ([Reloader.TLSConfig]) whose
// handshakes always use what was loaded last. [Reloader.Watch] watches the
// files and loads them again after a change, however the change is made: a
// file written in place, renamed over, or swapped behind a symbolic link
// anywhere on its path, as Kubernetes does when it updates a mounted Secret
// (the "..data" link renamed to a new directory) and as a release switch
// does (package fswatch). [Reloader.Reload] loads them on demand (SIGHUP).
//
// A load that fails (a file missing, unreadable or not PEM, a truncated
// chain, a key that does not match the certificate, a certificate whose
// validity has ended, a CA file without a certificate) changes nothing: the
// identity in use keeps serving, and the failure is logged and counted
// ([Reloader.Stats]). A new handshake takes the new identity; connections
// already open keep the one they were made with.
package tlsreload
