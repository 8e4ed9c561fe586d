package server

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/redlimit/redlimit/service/internal/rls"
)

// hostPolicy decides which Host header values the HTTP server answers.
//
// An IP address and localhost are always allowed, on any port. A page
// that reaches the server by DNS rebinding does so under a name its
// attacker controls. The browser sends that name as Host. It never uses
// an address or localhost: no resolver the attacker controls can answer
// for those. Other names are allowed only when listed: a name (any port),
// a name with a port, or a domain with its subdomains (".example.com").
// "*" allows any Host. The port of Host is not checked otherwise. It says
// nothing about the page that sent the request, and tunnels (ssh -L,
// kubectl port-forward) change it.
type hostPolicy struct {
	any      bool
	names    map[string]bool // lower case, any port
	hostPort map[string]bool // lower-case name:port
	domains  []string        // ".example.com": it and its subdomains
}

// newHostPolicy returns the policy of the allowed-host list; errors wrap
// ErrOptions.
func newHostPolicy(list []string) (*hostPolicy, error) {
	p := &hostPolicy{names: map[string]bool{}, hostPort: map[string]bool{}}
	for _, h := range list {
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "*":
			p.any = true
		case h == "" || strings.ContainsAny(h, "/@?#*") || strings.Contains(h, "://"):
			return nil, fmt.Errorf("%w: AllowedHosts: %q is not a host name, host:port or .domain", ErrOptions, h)
		case strings.HasPrefix(h, "."):
			if len(h) < 2 {
				return nil, fmt.Errorf("%w: AllowedHosts: %q names no domain", ErrOptions, h)
			}
			p.domains = append(p.domains, strings.TrimSuffix(h, "."))
		default:
			name, port, ok := splitHost(h)
			if !ok || name == "" {
				return nil, fmt.Errorf("%w: AllowedHosts: %q is not a host name or host:port", ErrOptions, h)
			}
			if port == "" {
				p.names[name] = true
			} else {
				p.hostPort[name+":"+port] = true
			}
		}
	}
	return p, nil
}

// splitHost splits a Host value into its lower-case name (no brackets, no
// final dot) and port, and reports whether it is well formed: a port, if
// any, is a number from 0 to 65535.
func splitHost(hostport string) (name, port string, ok bool) {
	name = hostport
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		name, port = h, p
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || strconv.FormatUint(n, 10) != p {
			return "", "", false
		}
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		name = hostport[1 : len(hostport)-1]
	} else if strings.Contains(hostport, ":") && !isIP(hostport) {
		return "", "", false
	}
	return strings.TrimSuffix(strings.ToLower(name), "."), port, true
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// allows reports whether the server answers a request whose Host is
// hostport. A request without Host (HTTP/1.0) is answered: no browser sends
// one.
func (p *hostPolicy) allows(hostport string) bool {
	if p.any || hostport == "" {
		return true
	}
	name, port, ok := splitHost(hostport)
	if !ok {
		return false
	}
	if name == "localhost" || isIP(name) || p.names[name] || p.hostPort[name+":"+port] {
		return true
	}
	for _, d := range p.domains {
		if name == d[1:] || strings.HasSuffix(name, d) {
			return true
		}
	}
	return false
}

// checkHost answers 421 Misdirected Request, without calling next, to a
// request whose Host the policy does not allow.
func (p *hostPolicy) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !p.allows(r.Host) {
			rls.WriteProblem(w, http.StatusMisdirectedRequest,
				fmt.Sprintf("Host %q is not allowed here: the server answers IP addresses, localhost and the names in its allowed hosts (--allowed-hosts)", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// crossOrigin returns next behind net/http's CrossOriginProtection. A
// request that can change something (not GET, HEAD or OPTIONS) from a
// browser page of another origin is refused with 403. So is a GET or HEAD
// that a page of another site makes the browser send. That is an image, a
// script, a frame or a fetch: Sec-Fetch-Site cross-site, and not a
// top-level navigation, which a user follows. Some GETs cost work: a CPU
// profile under --pprof. Requests from the same origin, links a user
// follows, and clients that are not browsers are served.
func crossOrigin(next http.Handler) http.Handler {
	c := http.NewCrossOriginProtection()
	c.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rls.WriteProblem(w, http.StatusForbidden, "cross-origin request refused: a page of another origin cannot "+r.Method+" here")
	}))
	h := c.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" &&
			(r.Header.Get("Sec-Fetch-Mode") != "navigate" || r.Header.Get("Sec-Fetch-Dest") != "document") {
			rls.WriteProblem(w, http.StatusForbidden, "cross-origin request refused: a page of another site cannot make the browser fetch "+r.URL.Path)
			return
		}
		h.ServeHTTP(w, r)
	})
}
