package rls

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
)

// DefaultMaxBodyBytes is the body limit of [Service.JSONHandler] when it is
// given none.
const DefaultMaxBodyBytes = 1 << 20

// JSONHandler returns the handler of POST /json, as envoyproxy/ratelimit
// serves it. The body is a RateLimitRequest and the answer a
// RateLimitResponse, both in protojson. The status is 200 when the
// overall code is OK, and 429 when it is OVER_LIMIT.
//
// The body is read as UTF-8 JSON whatever its Content-Type. So curl -d (a
// form's type) works. A browser's cross-site POST can carry JSON under a
// form's type too. Refusing those is the server's job: it puts every
// route behind a cross-origin check.
//
// Errors are RFC 9457 problem details (application/problem+json):
//   - 400 for a malformed body, or a request [Service.Decide] refuses;
//   - 413 for a body above maxBody bytes (DefaultMaxBodyBytes when
//     maxBody <= 0);
//   - 415 for a body that is not a RateLimitRequest and was not sent as
//     application/json;
//   - 405 for a method other than POST;
//   - 503 before the first configuration, or when the limiter is closed;
//   - 500 when the limiter fails.
//
// A refused request consumes nothing.
func (s *Service) JSONHandler(maxBody int64) http.Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			WriteProblem(w, http.StatusMethodNotAllowed, "POST a RateLimitRequest in JSON")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				WriteProblem(w, http.StatusRequestEntityTooLarge, "the body is larger than "+strconv.FormatInt(maxBody, 10)+" bytes")
				return
			}
			WriteProblem(w, http.StatusBadRequest, "reading the body: "+err.Error())
			return
		}
		if n, most := jsonObjects(body), s.maxJSONObjects(); n > most {
			WriteProblem(w, http.StatusBadRequest, "the body holds "+strconv.Itoa(n)+" JSON objects, more than "+strconv.Itoa(most)+
				" (a request, its descriptors, their entries and limits)")
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
				WriteProblem(w, http.StatusUnsupportedMediaType, "send a RateLimitRequest in JSON, as Content-Type: application/json")
				return
			}
			WriteProblem(w, http.StatusBadRequest, "malformed RateLimitRequest: "+err.Error())
			return
		}
		resp, err := s.Decide(r.Context(), &req)
		if err != nil {
			code := http.StatusInternalServerError
			switch grpcCode(err) {
			case codes.InvalidArgument:
				code = http.StatusBadRequest
			case codes.Unavailable:
				code = http.StatusServiceUnavailable
			case codes.Canceled, codes.DeadlineExceeded:
				if r.Context().Err() != nil {
					return // the client is gone
				}
				code = http.StatusServiceUnavailable
			}
			WriteProblem(w, code, err.Error())
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			WriteProblem(w, http.StatusInternalServerError, "encoding the response: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}

// maxJSONObjects is the most JSON objects the body of a request within the
// caps can hold. Those are the request, and for each descriptor itself,
// its limit override and its entries. A body with more is refused before
// it is decoded. protojson allocates many times the size of a body of
// empty objects ({},{},...), which the caps would refuse only after
// (docs/SECURITY.md).
func (s *Service) maxJSONObjects() int {
	return 1 + s.opts.MaxDescriptors*(2+s.opts.MaxEntries)
}

// jsonObjects counts the objects ("{" outside strings) in a JSON text.
func jsonObjects(b []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{':
			n++
		}
	}
	return n
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// WriteProblem writes an RFC 9457 problem details response
// (application/problem+json) of status code with detail, as every error of
// the service's HTTP endpoints is written.
func WriteProblem(w http.ResponseWriter, code int, detail string) {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(code), Status: code, Detail: detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
