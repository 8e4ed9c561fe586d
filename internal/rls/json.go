package rls

import (
	"encoding/json"
	"errors"
	"io"
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
// serves it: the body is a RateLimitRequest and the answer a
// RateLimitResponse, both in protojson, with status 200 when the overall
// code is OK and 429 when it is OVER_LIMIT.
//
// Errors are RFC 9457 problem details (application/problem+json): 400 for a
// malformed body or a request [Service.Decide] refuses, 413 for a body
// above maxBody bytes (DefaultMaxBodyBytes when maxBody <= 0), 405 for a
// method other than POST, 503 before the first configuration or when the
// limiter is closed, 500 when the limiter fails.
func (s *Service) JSONHandler(maxBody int64) http.Handler {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeProblem(w, http.StatusMethodNotAllowed, "POST a RateLimitRequest in JSON")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				writeProblem(w, http.StatusRequestEntityTooLarge, "the body is larger than "+strconv.FormatInt(maxBody, 10)+" bytes")
				return
			}
			writeProblem(w, http.StatusBadRequest, "reading the body: "+err.Error())
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			writeProblem(w, http.StatusBadRequest, "malformed RateLimitRequest: "+err.Error())
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
			writeProblem(w, code, err.Error())
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			writeProblem(w, http.StatusInternalServerError, "encoding the response: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// writeProblem writes a problem details response of status code with detail.
func writeProblem(w http.ResponseWriter, code int, detail string) {
	b, _ := json.Marshal(problem{Type: "about:blank", Title: http.StatusText(code), Status: code, Detail: detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}
