package mcptest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// OTLPReceiver collects the spans exported to it over OTLP, as a
// collector receives them.
type OTLPReceiver struct {
	coltrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []*tracepb.Span
	// Services are the service.name of each export's resources.
	Services []string
}

func (r *OTLPReceiver) add(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				r.Services = append(r.Services, a.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
}

// Export implements the collector's gRPC trace service.
func (r *OTLPReceiver) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is the collector's OTLP/HTTP endpoint (protobuf).
func (r *OTLPReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(req.Body)
	var msg coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &msg)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Spans are the spans received so far.
func (r *OTLPReceiver) Spans() []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*tracepb.Span(nil), r.spans...)
}

// Attr is a span's attribute key, nil if it has none.
func Attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value
		}
	}
	return nil
}

// AttrString is a span's string attribute key, "" if it has none.
func AttrString(s *tracepb.Span, key string) string {
	if v := Attr(s, key); v != nil {
		return v.GetStringValue()
	}
	return ""
}

// StartOTLP starts a receiver for protocol ("http/protobuf" or "grpc") on
// a free loopback port, stopped when the test ends, and returns it with
// the endpoint to give as OTEL_EXPORTER_OTLP_ENDPOINT.
func StartOTLP(t testing.TB, protocol string) (*OTLPReceiver, string) {
	t.Helper()
	r := &OTLPReceiver{}
	if protocol == "grpc" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer()
		coltrace.RegisterTraceServiceServer(srv, r)
		go func() { _ = srv.Serve(l) }()
		t.Cleanup(srv.Stop)
		return r, "http://" + l.Addr().String()
	}
	ts := httptest.NewServer(r)
	t.Cleanup(ts.Close)
	return r, ts.URL
}
