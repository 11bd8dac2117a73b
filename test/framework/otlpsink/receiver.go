// Package otlpsink is a small in-process OTLP trace receiver (OTLP/gRPC and OTLP/HTTP with
// protobuf or JSON bodies), built on the OTLP protobuf types, with a printer that shows a received
// trace as a tree. `make demo` runs one so that a person sees a change's trace across clusters
// without installing a collector; the e2e runs one to check what deployed agents export. What it
// receives it can forward to another OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT), so the same
// spans reach Jaeger, Tempo or any OTLP backend.
package otlpsink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with the resource attributes of the process that sent it.
type Span struct {
	TraceID  trace.TraceID
	SpanID   trace.SpanID
	ParentID trace.SpanID // zero for a root span
	Name     string
	Start    time.Time
	End      time.Time
	// Error is the span's status message when its status is Error ("error" if it has none).
	Error string
	// Resource and Attributes hold the string form of every attribute.
	Resource   map[string]string
	Attributes map[string]string
}

// Duration is how long the span lasted.
func (s Span) Duration() time.Duration { return s.End.Sub(s.Start) }

// Process names the process a span ran in: service.name, and service.instance.id or k8s.pod.name
// when the resource has one.
func (s Span) Process() string {
	p := s.Resource["service.name"]
	if id := s.Resource["service.instance.id"]; id != "" {
		p += "/" + id
	} else if pod := s.Resource["k8s.pod.name"]; pod != "" {
		p += "/" + pod
	}
	return p
}

// Cluster is the k8s.cluster.name of the span's resource (else its cloud.region).
func (s Span) Cluster() string {
	if c := s.Resource["k8s.cluster.name"]; c != "" {
		return c
	}
	return s.Resource["cloud.region"]
}

// maxSpans bounds the receiver's memory: the oldest spans are dropped beyond it.
const maxSpans = 100000

// Receiver receives OTLP traces over gRPC and HTTP and keeps the spans in memory.
type Receiver struct {
	collectortrace.UnimplementedTraceServiceServer

	grpcLis, httpLis net.Listener
	grpcSrv          *grpc.Server
	httpSrv          *http.Server
	forward          *Forwarder
	stopOnce         sync.Once

	mu    sync.Mutex
	spans []Span
}

// Options configures Start.
type Options struct {
	// GRPCAddr and HTTPAddr are the listen addresses (default 127.0.0.1:0, a free port).
	GRPCAddr, HTTPAddr string
	// Forward, when set, receives a copy of every export request.
	Forward *Forwarder
}

// Start listens for OTLP/gRPC and OTLP/HTTP (POST /v1/traces) and serves until Stop.
func Start(opts Options) (*Receiver, error) {
	if opts.GRPCAddr == "" {
		opts.GRPCAddr = "127.0.0.1:0"
	}
	if opts.HTTPAddr == "" {
		opts.HTTPAddr = "127.0.0.1:0"
	}
	r := &Receiver{forward: opts.Forward}
	var err error
	if r.grpcLis, err = net.Listen("tcp", opts.GRPCAddr); err != nil {
		return nil, fmt.Errorf("OTLP/gRPC listener on %s: %w", opts.GRPCAddr, err)
	}
	if r.httpLis, err = net.Listen("tcp", opts.HTTPAddr); err != nil {
		r.grpcLis.Close()
		return nil, fmt.Errorf("OTLP/HTTP listener on %s: %w", opts.HTTPAddr, err)
	}
	r.grpcSrv = grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(r.grpcSrv, r)
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", r.serveHTTP)
	r.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.grpcSrv.Serve(r.grpcLis) }()
	go func() { _ = r.httpSrv.Serve(r.httpLis) }()
	return r, nil
}

// GRPCAddr is the host:port of the OTLP/gRPC listener.
func (r *Receiver) GRPCAddr() string { return r.grpcLis.Addr().String() }

// HTTPAddr is the host:port of the OTLP/HTTP listener.
func (r *Receiver) HTTPAddr() string { return r.httpLis.Addr().String() }

// Endpoint is the value of OTEL_EXPORTER_OTLP_ENDPOINT for a gRPC exporter (such as the agent's)
// sending here: http://host:port (plaintext).
func (r *Receiver) Endpoint() string { return "http://" + r.GRPCAddr() }

// Stop stops both listeners (in-flight exports finish first) and then the forwarder, which sends
// what it holds. Stopping twice is fine.
func (r *Receiver) Stop() {
	r.stopOnce.Do(func() {
		r.grpcSrv.GracefulStop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.httpSrv.Shutdown(ctx)
		if r.forward != nil {
			r.forward.Close()
		}
	})
}

// Export implements the OTLP/gRPC trace service.
func (r *Receiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// serveHTTP implements OTLP/HTTP: a protobuf (application/x-protobuf) or JSON (application/json)
// ExportTraceServiceRequest, answered in the same encoding.
func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST an ExportTraceServiceRequest", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	msg := &collectortrace.ExportTraceServiceRequest{}
	resp := &collectortrace.ExportTraceServiceResponse{}
	var out []byte
	switch ct {
	case "application/x-protobuf":
		if err = proto.Unmarshal(body, msg); err == nil {
			out, err = proto.Marshal(resp)
		}
	case "application/json":
		if err = protojson.Unmarshal(body, msg); err == nil {
			out, err = protojson.Marshal(resp)
		}
	default:
		http.Error(w, "Content-Type must be application/x-protobuf or application/json", http.StatusUnsupportedMediaType)
		return
	}
	if err != nil {
		http.Error(w, "ExportTraceServiceRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.add(msg)
	w.Header().Set("Content-Type", ct)
	_, _ = w.Write(out)
}

func (r *Receiver) add(req *collectortrace.ExportTraceServiceRequest) {
	if r.forward != nil {
		r.forward.Send(req)
	}
	spans := Decode(req)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	if over := len(r.spans) - maxSpans; over > 0 {
		r.spans = append([]Span(nil), r.spans[over:]...)
	}
}

// Spans returns every span received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Trace returns the spans received for one trace.
func (r *Receiver) Trace(id trace.TraceID) []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, s := range r.spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// Decode flattens an export request into spans carrying their resource's attributes.
func Decode(req *collectortrace.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range req.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name:       s.GetName(),
					Start:      time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:        time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Resource:   res,
					Attributes: attrs(s.GetAttributes()),
				}
				copy(sp.TraceID[:], s.GetTraceId())
				copy(sp.SpanID[:], s.GetSpanId())
				copy(sp.ParentID[:], s.GetParentSpanId())
				if s.GetStatus().GetCode() == tracev1.Status_STATUS_CODE_ERROR {
					sp.Error = s.GetStatus().GetMessage()
					if sp.Error == "" {
						sp.Error = "error"
					}
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func attrs(kvs []*commonv1.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = valueString(kv.GetValue())
	}
	return m
}

func valueString(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonv1.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonv1.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonv1.AnyValue_ArrayValue:
		s := "["
		for i, e := range x.ArrayValue.GetValues() {
			if i > 0 {
				s += " "
			}
			s += valueString(e)
		}
		return s + "]"
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

// errClosed is returned by a Forwarder after Close.
var errClosed = errors.New("forwarder closed")

// Forwarder returns the receiver's forwarder, or nil.
func (r *Receiver) Forwarder() *Forwarder { return r.forward }
