//go:build integration

package syncer_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
)

// A management-side trace: a traceparent annotation as a management controller would write it.
func managementTrace(t *testing.T) (traceparent string, traceID trace.TraceID) {
	t.Helper()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("management-controller").Start(context.Background(), "create tenant")
	defer span.End()
	return telemetry.Traceparent(ctx), span.SpanContext().TraceID()
}

func traceIDOf(traceparent string) trace.TraceID {
	return trace.SpanContextFromContext(telemetry.ContextFromTraceparent(context.Background(), traceparent)).TraceID()
}

// spansIn returns the names of recorded spans in a trace.
func spansIn(rec *tracetest.SpanRecorder, id trace.TraceID) map[string]int {
	out := map[string]int{}
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() == id {
			out[s.Name()]++
		}
	}
	return out
}

// One change is one trace across clusters: the remote's traceparent parents the sync span, the
// copy carries the sync span's context, the tenant operator continues it, and the status it
// writes comes back up inside the same trace.
func TestTraceAcrossClustersRecorded(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp, _, err := tracer.NewTestTracerProvider(rec, tracer.Identity{Region: "region"})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, withTracerProvider(tp))
	ns := e.remoteNamespace("traced")
	parent, traceID := managementTrace(t)
	e.tenant(ns, "acme", "Acme", annotate(e.keys.TraceParent, parent))
	_, local := e.waitSynced(ns, "acme")

	if got := traceIDOf(local.Annotations[e.keys.TraceParent]); got != traceID {
		t.Fatalf("local copy's traceparent %q is not in the management trace %s", local.Annotations[e.keys.TraceParent], traceID)
	}
	e.eventually("agent and operator spans in the management trace", func() error {
		agent, operator := spansIn(rec, traceID), spansIn(operatorSpans, traceID)
		for _, name := range []string{"sync Tenant.demo.regionsync.dev", "claim", "create local", "patch generations", "upload status"} {
			if agent[name] == 0 {
				return fmt.Errorf("agent span %q missing; have %v", name, agent)
			}
		}
		if operator["tenant-operator reconcile"] == 0 || operator["update tenant status"] == 0 {
			return fmt.Errorf("operator spans %v", operator)
		}
		return nil
	})
	// The sync span carries the attributes an operator needs.
	for _, s := range rec.Ended() {
		if s.SpanContext().TraceID() != traceID || s.Name() != "sync Tenant.demo.regionsync.dev" {
			continue
		}
		attrs := map[string]bool{}
		for _, a := range s.Attributes() {
			attrs[string(a.Key)] = true
		}
		for _, k := range []string{"regionsync.resource", "regionsync.remote", "regionsync.local", "regionsync.remote_generation", "regionsync.actions"} {
			if !attrs[k] {
				t.Errorf("sync span lacks %s: %v", k, s.Attributes())
			}
		}
		break
	}
}

// otlpReceiver is a minimal OTLP/gRPC trace receiver: it keeps what the real exporter sends.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	mu   sync.Mutex
	reqs []*collectortrace.ExportTraceServiceRequest
}

func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// spans returns span name → resource attributes for spans of a trace.
func (r *otlpReceiver) spans(id trace.TraceID) map[string]map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]map[string]string{}
	for _, req := range r.reqs {
		for _, rs := range req.ResourceSpans {
			res := map[string]string{}
			for _, a := range rs.GetResource().GetAttributes() {
				res[a.Key] = a.GetValue().GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if trace.TraceID(s.TraceId) == id {
						out[s.Name] = res
					}
				}
			}
		}
	}
	return out
}

// The same chain through the real OTLP exporter to an OTLP receiver.
func TestTraceAcrossClustersOTLP(t *testing.T) {
	t.Parallel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	recv := &otlpReceiver{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, recv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	e := newEnv(t, withTracing(fleetspec.Tracing{Endpoint: lis.Addr().String(), Insecure: true}))
	ns := e.remoteNamespace("otlp")
	parent, traceID := managementTrace(t)
	e.tenant(ns, "acme", "Acme", annotate(e.keys.TraceParent, parent))
	_, local := e.waitSynced(ns, "acme")
	if got := traceIDOf(local.Annotations[e.keys.TraceParent]); got != traceID {
		t.Fatalf("local traceparent not in the management trace")
	}
	e.stop() // flushes the batch exporter
	spans := recv.spans(traceID)
	syncSpan, ok := spans["sync Tenant.demo.regionsync.dev"]
	if !ok {
		t.Fatalf("no sync span in the management trace was exported; got %v", spans)
	}
	want := map[string]string{"service.name": "regionsync-agent", "cloud.region": e.opts.Region, "k8s.cluster.name": e.opts.Region}
	for k, v := range want {
		if syncSpan[k] != v {
			t.Errorf("resource attribute %s = %q, want %q", k, syncSpan[k], v)
		}
	}
	if _, ok := spans["upload status"]; !ok {
		t.Errorf("status upload not in the trace: %v", spans)
	}
	if spansIn(operatorSpans, traceID)["tenant-operator reconcile"] == 0 {
		t.Error("tenant operator's span not in the management trace")
	}
}
