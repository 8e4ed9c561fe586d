package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/ruleset"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// Options configures a [Middleware]. The zero value is the default: both
// header families, a 429 problem+json body on denial, a 400 or 503 problem
// on errors, fail open, and slog.Default for logs.
type Options struct {
	// Headers selects the rate-limit header fields set on every response
	// that at least one rule applied to. The zero value is
	// [ratelimitfield.All]. Retry-After is set on every denial that can be
	// retried, whatever the selection.
	Headers ratelimitfield.Style

	// OnDenied writes the response to a denied request. The middleware has
	// already set the rate-limit fields and Retry-After. nil means
	// [WriteDenial]: 429 with an RFC 9457 problem body.
	OnDenied func(w http.ResponseWriter, r *http.Request, d Denial)

	// OnError writes the response when the request cannot be decided. A
	// rule's key, limit or cost function failed (err is a *[KeyError]).
	// Or the limiter failed and FailClosed is set. Or the request's
	// context ended before the limiter decided. nil means [WriteError].
	OnError func(w http.ResponseWriter, r *http.Request, err error)

	// FailClosed makes a limiter error (Redis unreachable, a deadline)
	// refuse the request through OnError, by default with 503. Otherwise
	// the request is served without limits, and the error logged: failing
	// open. A request whose own context ends (its client went away)
	// before the limiter decides its enforced rules is refused either way,
	// through OnError. Shadow rules alone never refuse. A
	// resilient limiter in front of the store can choose more finely; this
	// is the last line.
	FailClosed bool

	// Logger receives limiter errors (level Error), shadow rules that would
	// deny (Info), key errors (Warn) and denials (Debug). nil means
	// slog.Default() at the time of logging.
	Logger *slog.Logger
}

// Middleware rate limits the requests of the handlers it wraps. Make one
// with [New]; it is safe for concurrent use.
type Middleware struct {
	lim    redlimit.Limiter
	opts   Options
	rules  *ruleset.Set[*http.Request]
	sem    redlimit.Semaphore // lim, when it keeps leases
	routes routes
}

// New returns a middleware that decides every request against rules with
// lim. Its error wraps [ErrNoRules] for no rules, and [ErrInvalidRule] for a
// bad name, key function or cost. A bad limit gets the redlimit sentinel
// errors.
func New(lim redlimit.Limiter, opts Options, rules ...Rule) (*Middleware, error) {
	if lim == nil {
		return nil, errors.New("httplimit: nil limiter")
	}
	if !opts.Headers.Valid() {
		return nil, errors.New("httplimit: unknown Headers value")
	}
	rs, err := newRuleSet(rules)
	if err != nil {
		return nil, err
	}
	rt, err := newRoutes(rules)
	if err != nil {
		return nil, err
	}
	sem, ok := lim.(redlimit.Semaphore)
	if len(rs.Held) > 0 && !ok {
		return nil, fmt.Errorf("%w: in-flight rules need a limiter that keeps leases (a redlimit.Semaphore)", ErrInvalidRule)
	}
	return &Middleware{lim: lim, opts: opts, rules: rs, sem: sem, routes: rt}, nil
}

// Handle returns next wrapped by the middleware. Requests that every enforced
// rule allows reach next, with the rate-limit header fields already set;
// the others get the response of OnDenied.
func (m *Middleware) Handle(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) logger() *slog.Logger {
	if m.opts.Logger != nil {
		return m.opts.Logger
	}
	return slog.Default()
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if len(m.rules.Held) > 0 {
		next = m.holding(next)
	}
	ctx := r.Context()
	applied, bad, err := m.rules.Apply(r, m.routes.match(r), func(rule *ruleset.Rule[*http.Request], err error) {
		m.logger().LogAttrs(ctx, slog.LevelWarn, "httplimit: request not decided by a shadow rule: bad key, limit or cost", requestAttrs(r, slog.Any("err", &KeyError{Rule: rule.Name, Err: err}))...)
	})
	if err != nil {
		kerr := &KeyError{Rule: bad.Name, Err: err}
		m.logger().LogAttrs(ctx, slog.LevelWarn, "httplimit: request not decided: bad key, limit or cost", requestAttrs(r, slog.Any("err", kerr))...)
		m.onError(w, r, kerr)
		return
	}
	if len(applied) == 0 {
		next.ServeHTTP(w, r)
		return
	}

	v, err := m.rules.Decide(ctx, m.lim, m.logger(), applied, requestAttrs(r))
	if err != nil {
		if cerr := ruleset.Ended(ctx); cerr != nil {
			// The request ended before the limiter decided: its client
			// went away, or its deadline passed. It is not served, limited
			// or not. Otherwise a client would get its work done past its
			// limit by giving up on each request.
			m.logger().LogAttrs(ctx, slog.LevelWarn, "httplimit: the request ended before the limiter decided", requestAttrs(r, slog.Any("err", err))...)
			m.onError(w, r, err)
			return
		}
		if m.opts.FailClosed {
			m.logger().LogAttrs(ctx, slog.LevelError, "httplimit: limiter failed; refusing the request", requestAttrs(r, slog.Any("err", err))...)
			m.onError(w, r, err)
			return
		}
		m.logger().LogAttrs(ctx, slog.LevelError, "httplimit: limiter failed; serving the request unlimited", requestAttrs(r, slog.Any("err", err))...)
		next.ServeHTTP(w, r)
		return
	}

	h := w.Header()
	m.opts.Headers.Write(v.Quotas(), h.Set)
	if v.Allowed {
		next.ServeHTTP(w, r)
		return
	}
	d := denial(&v)
	if ra, ok := ratelimitfield.RetryAfterValue(d.RetryAfter); ok {
		h.Set(ratelimitfield.HeaderRetryAfter, ra)
	}
	m.logger().LogAttrs(ctx, slog.LevelDebug, "httplimit: denied", requestAttrs(r,
		slog.String("rule", d.Rule), slog.Duration("retry_after", d.RetryAfter))...)
	if m.opts.OnDenied != nil {
		m.opts.OnDenied(w, r, d)
		return
	}
	WriteDenial(w, r, d)
}

// holding returns next holding the slots of the in-flight rules for the
// life of each request (see Rule.InFlight).
func (m *Middleware) holding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		release, rule, l, err := m.rules.Hold(ctx, m.sem, r, m.routes.match(r))
		defer release()
		switch {
		case err != nil && ruleset.KeyFailed(err):
			kerr := &KeyError{Rule: rule.Name, Err: err}
			m.logger().LogAttrs(ctx, slog.LevelWarn, "httplimit: request not decided: bad key", requestAttrs(r, slog.Any("err", kerr))...)
			m.onError(w, r, kerr)
		case err != nil && m.opts.FailClosed:
			m.logger().LogAttrs(ctx, slog.LevelError, "httplimit: limiter failed; refusing the request", requestAttrs(r, slog.Any("err", err))...)
			m.onError(w, r, err)
		case err != nil:
			m.logger().LogAttrs(ctx, slog.LevelError, "httplimit: limiter failed; serving the request unlimited", requestAttrs(r, slog.Any("err", err))...)
			next.ServeHTTP(w, r)
		case rule != nil:
			d := Denial{Rule: rule.Name, Violated: []string{rule.Name}, RetryAfter: l.RetryAfter, InFlight: rule.InFlight}
			if ra, ok := ratelimitfield.RetryAfterValue(d.RetryAfter); ok {
				w.Header().Set(ratelimitfield.HeaderRetryAfter, ra)
			}
			m.logger().LogAttrs(ctx, slog.LevelDebug, "httplimit: denied: no slot free", requestAttrs(r, slog.String("rule", d.Rule))...)
			if m.opts.OnDenied != nil {
				m.opts.OnDenied(w, r, d)
				return
			}
			WriteDenial(w, r, d)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func (m *Middleware) onError(w http.ResponseWriter, r *http.Request, err error) {
	if m.opts.OnError != nil {
		m.opts.OnError(w, r, err)
		return
	}
	WriteError(w, r, err)
}

// denial describes the enforced denial in v.
func denial(v *ruleset.Verdict[*http.Request]) Denial {
	d := Denial{RetryAfter: v.RetryAfter}
	denied, worst := v.Denied()
	for _, i := range denied {
		d.Violated = append(d.Violated, v.Applied[i].Rule.Name)
	}
	if worst >= 0 {
		w := v.Applied[worst]
		d.Rule, d.Limit, d.Result = w.Rule.Name, w.Limit, v.Results[worst]
	}
	return d
}

// requestAttrs returns the log attributes of r, then extra.
func requestAttrs(r *http.Request, extra ...slog.Attr) []slog.Attr {
	return append([]slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path)}, extra...)
}
