package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// Defaults of the service targets' request.
const (
	// DefaultDomain is the domain of the requests when none is set.
	DefaultDomain = "bench"
	// DefaultDescriptorKey is the key of the descriptor entry when none is set.
	DefaultDescriptorKey = "key"
)

// request returns the RateLimitRequest of one decision: in domain, one
// descriptor of one entry {descKey: key}, and cost as hits_addend (left
// out for a cost of 1, which is what the service assumes without it).
func request(domain, descKey, key string, cost int64) (*pb.RateLimitRequest, error) {
	if cost < 1 || cost > math.MaxUint32 {
		return nil, fmt.Errorf("%w: cost %d is not in 1..%d, the range of hits_addend", ErrInvalidOptions, cost, uint32(math.MaxUint32))
	}
	if domain == "" {
		domain = DefaultDomain
	}
	if descKey == "" {
		descKey = DefaultDescriptorKey
	}
	req := &pb.RateLimitRequest{
		Domain: domain,
		Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: descKey, Value: key}},
		}},
	}
	if cost != 1 {
		req.HitsAddend = uint32(cost)
	}
	return req, nil
}

// answer turns an overall code into a decision.
func answer(code pb.RateLimitResponse_Code) (bool, error) {
	switch code {
	case pb.RateLimitResponse_OK:
		return true, nil
	case pb.RateLimitResponse_OVER_LIMIT:
		return false, nil
	}
	return false, fmt.Errorf("%w: overall code %s", ErrUnexpectedAnswer, code)
}

// GRPCTarget asks a rate limit service over gRPC, with the Envoy RLS v3 API
// (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit). Each
// decision is one request in Domain with one descriptor holding one entry,
// DescriptorKey = the key, and the cost as hits_addend. OK is allowed,
// OVER_LIMIT denied; anything else is an error.
type GRPCTarget struct {
	// Client calls the service; DialGRPC sets it.
	Client pb.RateLimitServiceClient
	// Domain of the requests; "" is DefaultDomain.
	Domain string
	// DescriptorKey is the key of the descriptor's entry; "" is
	// DefaultDescriptorKey.
	DescriptorKey string

	addr string
	conn *grpc.ClientConn
}

var _ Target = (*GRPCTarget)(nil)

// DialGRPC returns a GRPCTarget on a new plaintext connection to addr
// (host:port). It does not wait for the connection: the first call makes
// it. Close closes it.
func DialGRPC(addr string) (*GRPCTarget, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("loadgen: grpc %s: %w", addr, err)
	}
	return &GRPCTarget{Client: pb.NewRateLimitServiceClient(conn), addr: addr, conn: conn}, nil
}

// Decide asks the service about one request of cost for key.
func (t *GRPCTarget) Decide(ctx context.Context, key string, cost int64) (bool, error) {
	req, err := request(t.Domain, t.DescriptorKey, key, cost)
	if err != nil {
		return false, err
	}
	resp, err := t.Client.ShouldRateLimit(ctx, req)
	if err != nil {
		return false, err
	}
	return answer(resp.GetOverallCode())
}

// Close closes the connection DialGRPC made; it does nothing for a
// GRPCTarget built with a Client of the caller's.
func (t *GRPCTarget) Close() error {
	if t.conn == nil {
		return nil
	}
	return t.conn.Close()
}

// String describes the target: "grpc" and the address it was dialled to.
func (t *GRPCTarget) String() string { return strings.TrimSpace("grpc " + t.addr) }

// JSONTarget asks a rate limit service over HTTP: each decision POSTs the
// protojson of the same RateLimitRequest GRPCTarget sends to URL, and reads
// 200 as allowed and 429 as denied. Any other status is an error holding
// the problem details' detail, or the start of the body.
type JSONTarget struct {
	// URL is the endpoint, such as "http://127.0.0.1:8080/json".
	URL string
	// Client sends the requests; nil is http.DefaultClient. NewJSONTarget
	// gives it a transport that keeps up to 1024 idle connections to the
	// service, so that many workers reuse their connections:
	// http.DefaultClient keeps only two.
	Client *http.Client
	// Domain of the requests; "" is DefaultDomain.
	Domain string
	// DescriptorKey is the key of the descriptor's entry; "" is
	// DefaultDescriptorKey.
	DescriptorKey string
}

var _ Target = (*JSONTarget)(nil)

// maxIdleConns is how many idle connections a JSONTarget's own client keeps.
const maxIdleConns = 1024

// NewJSONTarget returns a JSONTarget posting to url with a client of its own.
func NewJSONTarget(url string) *JSONTarget {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = maxIdleConns
	tr.MaxIdleConnsPerHost = maxIdleConns
	return &JSONTarget{URL: url, Client: &http.Client{Transport: tr}}
}

// Decide posts one request of cost for key.
func (t *JSONTarget) Decide(ctx context.Context, key string, cost int64) (bool, error) {
	req, err := request(t.Domain, t.DescriptorKey, key, cost)
	if err != nil {
		return false, err
	}
	body, err := protojson.Marshal(req)
	if err != nil {
		return false, fmt.Errorf("loadgen: encoding the request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("loadgen: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	c := t.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(hreq)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK, http.StatusTooManyRequests:
		// Read to the end, so that the connection is reused.
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return false, fmt.Errorf("loadgen: reading the answer: %w", err)
		}
		return resp.StatusCode == http.StatusOK, nil
	}
	return false, fmt.Errorf("%w: %s: %s", ErrUnexpectedAnswer, resp.Status, problemDetail(resp.Body))
}

// problemDetail returns the detail of an RFC 9457 problem in r, or the
// start of r when it holds none.
func problemDetail(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 512))
	var p struct {
		Detail string `json:"detail"`
	}
	if json.Unmarshal(b, &p) == nil && p.Detail != "" {
		return p.Detail
	}
	if s := strings.TrimSpace(string(b)); s != "" {
		return s
	}
	return "empty body"
}

// Close closes the client's idle connections.
func (t *JSONTarget) Close() error {
	if t.Client != nil {
		t.Client.CloseIdleConnections()
	}
	return nil
}

// String describes the target: "json" and its URL.
func (t *JSONTarget) String() string { return "json " + t.URL }
