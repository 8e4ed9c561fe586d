package httplimit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/ratelimitfield"
)

// ProblemTypeQuotaExceeded is the problem type of a denial, registered by
// draft-ietf-httpapi-ratelimit-headers (Section 5.1).
const ProblemTypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// ContentTypeProblem is the media type of an RFC 9457 problem in JSON.
const ContentTypeProblem = "application/problem+json"

// A Denial describes why a request was denied, for [Options].OnDenied.
type Denial struct {
	// Rule names the enforced rule that denied with the longest wait.
	Rule string
	// Limit and Result are that rule's limit and result.
	Limit  redlimit.Limit
	Result redlimit.Result
	// Violated names every enforced rule that denied, in rule order.
	Violated []string
	// RetryAfter is how long until the request could pass: the longest wait
	// among the rules that denied it. It is [redlimit.Never] when the
	// request can never pass; the middleware then sends no Retry-After.
	RetryAfter time.Duration
	// InFlight is the limit of the in-flight rule that denied, which had
	// no free slot; Limit and Result are zero then.
	InFlight redlimit.Concurrency
}

// Problem is an RFC 9457 problem details object, with the extension members
// a denial carries.
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies names the rules that denied the request, the
	// "violated-policies" member of the quota-exceeded problem type.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// Limit names the rule that denied with the longest wait.
	Limit string `json:"limit,omitempty"`
	// RetryAfterSeconds is the Retry-After value; absent when the request
	// can never pass.
	RetryAfterSeconds int64 `json:"retry_after_seconds,omitempty"`
}

// WriteDenial writes the default response to a denied request: status 429
// (Too Many Requests) and a [Problem] of type [ProblemTypeQuotaExceeded].
// The Problem names the rules that denied the request. Unless it can never
// pass, it says when to retry. A request that can never pass also gets
// 429, without Retry-After, so the client does not come back. Its cost
// exceeds the limit's capacity; New rules that out for its own rules.
func WriteDenial(w http.ResponseWriter, r *http.Request, d Denial) {
	p := Problem{
		Type:             ProblemTypeQuotaExceeded,
		Title:            "Quota Exceeded",
		Status:           http.StatusTooManyRequests,
		ViolatedPolicies: d.Violated,
		Limit:            d.Rule,
	}
	what := fmt.Sprintf("Rate limit %q (%s)", d.Rule, d.Limit)
	if d.InFlight.Slots > 0 {
		what = fmt.Sprintf("Concurrency limit %q (%d in flight)", d.Rule, d.InFlight.Slots)
	}
	if d.RetryAfter == redlimit.Never {
		p.Detail = what + " exceeded: the request costs more than the limit ever allows."
	} else {
		p.RetryAfterSeconds = ratelimitfield.RetryAfterSeconds(d.RetryAfter)
		unit := "seconds"
		if p.RetryAfterSeconds == 1 {
			unit = "second"
		}
		p.Detail = fmt.Sprintf("%s exceeded: retry after %d %s.", what, p.RetryAfterSeconds, unit)
	}
	WriteProblem(w, p)
}

// WriteError writes the default response when a request cannot be decided.
// It writes 400 (Bad Request) when a rule's key, limit or cost function
// failed for the request (err is a *[KeyError]). Otherwise the limiter
// failed, and it writes 503 (Service Unavailable). The body is a [Problem]
// that names the rule but not the error. The error is logged instead.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	if ke, ok := errors.AsType[*KeyError](err); ok {
		WriteProblem(w, Problem{
			Type:   "about:blank",
			Title:  http.StatusText(http.StatusBadRequest),
			Status: http.StatusBadRequest,
			Detail: fmt.Sprintf("The request gives rate limit %q no key, limit or cost it can use.", ke.Rule),
		})
		return
	}
	WriteProblem(w, Problem{
		Type:   "about:blank",
		Title:  http.StatusText(http.StatusServiceUnavailable),
		Status: http.StatusServiceUnavailable,
		Detail: "The rate limiter is unavailable.",
	})
}

// WriteProblem writes p as application/problem+json with status p.Status.
func WriteProblem(w http.ResponseWriter, p Problem) {
	body, err := json.Marshal(p)
	if err != nil { // cannot happen: Problem holds strings and numbers
		http.Error(w, p.Title, p.Status)
		return
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeProblem)
	h.Set("Content-Length", fmt.Sprint(len(body)+1))
	h.Del("Content-Encoding")
	w.WriteHeader(p.Status)
	w.Write(append(body, '\n'))
}
