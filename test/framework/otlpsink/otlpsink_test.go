package otlpsink_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/internal/telemetry/tracer"
	"github.com/regionsync/regionsync/test/framework/otlpsink"
)

// exporter is one process's tracer, set up as the agent sets up its own (telemetry's OTLP/gRPC
// batch exporter), sending to endpoint.
type exporter struct {
	tracer   trace.Tracer
	shutdown func(context.Context) error
}

func newExporter(t *testing.T, endpoint string, id tracer.Identity) exporter {
	t.Helper()
	one := 1.0
	tp, shutdown, err := tracer.NewTracerProvider(context.Background(),
		fleetspec.Tracing{Endpoint: endpoint, Insecure: true, SamplingRatio: &one}, id)
	if err != nil {
		t.Fatal(err)
	}
	return exporter{tracer: tp.Tracer(id.ServiceName), shutdown: shutdown}
}

// roundTrip records one change's spans the way the demo's processes do: the management side
// starts the trace and hands it on as a traceparent (an annotation), the agent continues it and
// writes its sync span's context on the copy, the operator continues that. When lost is set, the management span comes from a process
// whose spans are never exported.
type roundTrip struct {
	traceID               trace.TraceID
	managementSpan        trace.SpanID
	agentSync, uploadSync trace.SpanID
}

func record(ctx context.Context, mgmt, agent, operator trace.Tracer) roundTrip {
	var rt roundTrip
	mctx, mspan := mgmt.Start(ctx, "create tenant acme/acme-us-east-1")
	rt.traceID, rt.managementSpan = mspan.SpanContext().TraceID(), mspan.SpanContext().SpanID()
	remoteAnnotation := telemetry.Traceparent(mctx)
	time.Sleep(time.Millisecond)
	mspan.End()

	actx, sync := agent.Start(telemetry.ContextFromTraceparent(ctx, remoteAnnotation), "sync Tenant.demo.regionsync.dev")
	rt.agentSync = sync.SpanContext().SpanID()
	for _, write := range []string{"claim", "create local", "patch generations"} {
		_, w := agent.Start(actx, write)
		if write == "create local" {
			// The operator continues the trace the copy's annotation carries (the sync span's).
			octx, rec := operator.Start(telemetry.ContextFromTraceparent(ctx, telemetry.Traceparent(actx)), "tenant-operator reconcile")
			_, st := operator.Start(octx, "update tenant status")
			time.Sleep(time.Millisecond)
			st.End()
			rec.End()
		}
		w.End()
	}
	sync.End()
	uctx, up := agent.Start(telemetry.ContextFromTraceparent(ctx, remoteAnnotation), "sync Tenant.demo.regionsync.dev")
	rt.uploadSync = up.SpanContext().SpanID()
	_, u := agent.Start(uctx, "upload status")
	u.SetStatus(codes.Error, "the object has been modified")
	u.End()
	up.End()
	return rt
}

// shape returns the span column of a printed tree (tree prefixes and names).
func shape(out string) []string {
	rows := strings.Split(strings.TrimRight(out, "\n"), "\n")[1:] // after the header
	width := strings.Index(rows[0], "DURATION")
	lines := make([]string, 0, len(rows)-1)
	for _, l := range rows[1:] {
		r := []rune(l)
		lines = append(lines, strings.TrimRight(strings.TrimPrefix(string(r[:min(width, len(r))]), "  "), " "))
	}
	return lines
}

// The printer, on spans real exporters sent to the receiver: the tree follows the parent links
// across processes, and a parent that never arrived is shown as missing with its children under it.
func TestPrintTraceFromReceivedSpans(t *testing.T) {
	recv, err := otlpsink.Start(otlpsink.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer recv.Stop()
	mgmt := newExporter(t, recv.GRPCAddr(), tracer.Identity{ServiceName: "regionsync-demo", ClusterName: "management"})
	agent := newExporter(t, recv.GRPCAddr(), tracer.Identity{Region: "us-east-1", ClusterName: "us-east-1"})
	operator := newExporter(t, recv.Endpoint(), tracer.Identity{ServiceName: "tenant-operator", Region: "us-east-1", ClusterName: "us-east-1"})
	// A management controller whose spans go nowhere (tracing not exported).
	unexported := sdktrace.NewTracerProvider().Tracer("management-controller")

	ctx := context.Background()
	complete := record(ctx, mgmt.tracer, agent.tracer, operator.tracer)
	lost := record(ctx, unexported, agent.tracer, operator.tracer)
	for _, e := range []exporter{mgmt, agent, operator} {
		if err := e.shutdown(ctx); err != nil { // flushes the batch exporters
			t.Fatal(err)
		}
	}

	tests := map[string]struct {
		rt        roundTrip
		want      []string
		spans     int
		processes int
	}{
		"complete": {rt: complete, spans: 9, processes: 3, want: []string{
			"create tenant acme/acme-us-east-1",
			"├─ sync Tenant.demo.regionsync.dev",
			"│  ├─ claim",
			"│  ├─ create local",
			"│  ├─ tenant-operator reconcile",
			"│  │  └─ update tenant status",
			"│  └─ patch generations",
			"└─ sync Tenant.demo.regionsync.dev",
			"   └─ upload status",
		}},
		"management span missing": {rt: lost, spans: 8, processes: 2, want: []string{
			"<missing: span " + lost.managementSpan.String() + " was not received>",
			"├─ sync Tenant.demo.regionsync.dev",
			"│  ├─ claim",
			"│  ├─ create local",
			"│  ├─ tenant-operator reconcile",
			"│  │  └─ update tenant status",
			"│  └─ patch generations",
			"└─ sync Tenant.demo.regionsync.dev",
			"   └─ upload status",
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spans := recv.Trace(tc.rt.traceID)
			var out bytes.Buffer
			if err := otlpsink.PrintTrace(&out, "  ", spans); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			if diff := cmp.Diff(tc.want, shape(out.String())); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
			header := fmt.Sprintf("  trace %s: %d spans from %d processes\n", tc.rt.traceID, tc.spans, tc.processes)
			if !strings.HasPrefix(out.String(), header) {
				t.Errorf("header: want %q", header)
			}
			// Every line names its process and cluster, from the resource the exporter sent.
			for _, l := range strings.Split(out.String(), "\n") {
				switch {
				case strings.Contains(l, "upload status"):
					if !strings.HasSuffix(l, "regionsync-agent @ us-east-1  error: the object has been modified") {
						t.Errorf("failed span without its process and error at the end: %q", l)
					}
				case strings.Contains(l, "sync Tenant"):
					if !strings.Contains(l, "regionsync-agent @ us-east-1") {
						t.Errorf("agent span without its process: %q", l)
					}
				case strings.Contains(l, "tenant-operator reconcile"):
					if !strings.Contains(l, "tenant-operator @ us-east-1") {
						t.Errorf("operator span without its process: %q", l)
					}
				case strings.Contains(l, "create tenant"):
					if !strings.Contains(l, "regionsync-demo @ management") {
						t.Errorf("management span without its process: %q", l)
					}
				}
			}
		})
	}
}

func spanIDs(spans []otlpsink.Span) []string {
	ids := make([]string, 0, len(spans))
	for _, s := range spans {
		ids = append(ids, s.TraceID.String()+"/"+s.SpanID.String()+" "+s.Name+" "+s.Resource["service.name"])
	}
	sort.Strings(ids)
	return ids
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a second receiver gets every span the first received, over
// each protocol the variable may name.
func TestForwardToEnvEndpoint(t *testing.T) {
	for _, protocol := range []string{"", otlpsink.ProtocolGRPC, otlpsink.ProtocolHTTPProtobuf, otlpsink.ProtocolHTTPJSON} {
		t.Run("protocol "+protocol, func(t *testing.T) {
			backend, err := otlpsink.Start(otlpsink.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer backend.Stop()
			endpoint := backend.Endpoint() // gRPC
			if strings.HasPrefix(protocol, "http/") {
				endpoint = "http://" + backend.HTTPAddr()
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=demo")
			cfg, ok, err := otlpsink.ForwardConfigFromEnv()
			if err != nil || !ok {
				t.Fatalf("ForwardConfigFromEnv: %v, %v", ok, err)
			}
			fwd, err := otlpsink.NewForwarder(cfg)
			if err != nil {
				t.Fatal(err)
			}
			recv, err := otlpsink.Start(otlpsink.Options{Forward: fwd})
			if err != nil {
				t.Fatal(err)
			}
			a := newExporter(t, recv.GRPCAddr(), tracer.Identity{Region: "eu-west-1", ClusterName: "eu-west-1"})
			o := newExporter(t, recv.GRPCAddr(), tracer.Identity{ServiceName: "tenant-operator", Region: "eu-west-1", ClusterName: "eu-west-1"})
			m := newExporter(t, recv.GRPCAddr(), tracer.Identity{ServiceName: "regionsync-demo", ClusterName: "management"})
			record(context.Background(), m.tracer, a.tracer, o.tracer)
			for _, e := range []exporter{m, a, o} {
				if err := e.shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			recv.Stop() // sends what the forwarder holds
			got := recv.Spans()
			if len(got) != 9 {
				t.Fatalf("receiver got %d spans, want 9", len(got))
			}
			if diff := cmp.Diff(spanIDs(got), spanIDs(backend.Spans())); diff != "" {
				sent, failed, dropped, lastErr := fwd.Stats()
				t.Errorf("forwarded spans (-received +backend):\n%s\nforwarder: sent %d failed %d dropped %d, %v", diff, sent, failed, dropped, lastErr)
			}
		})
	}
}

func TestForwardConfigFromEnv(t *testing.T) {
	tests := map[string]struct {
		env     map[string]string
		want    otlpsink.ForwardConfig
		ok      bool
		wantErr string
	}{
		"unset": {env: map[string]string{}},
		"grpc by default, endpoint as given": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4317"},
			want: otlpsink.ForwardConfig{Endpoint: "http://localhost:4317", Protocol: "grpc"}, ok: true,
		},
		"http appends the traces path": {
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://tempo:4318/", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			want: otlpsink.ForwardConfig{Endpoint: "http://tempo:4318/v1/traces", Protocol: "http/protobuf"}, ok: true,
		},
		"traces endpoint used as is and preferred": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/custom",
				"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			want: otlpsink.ForwardConfig{Endpoint: "http://b:4318/custom", Protocol: "http/json"}, ok: true,
		},
		"headers and insecure": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4317", "OTEL_EXPORTER_OTLP_INSECURE": "true",
				"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20x, x-scope-orgid=acme"},
			want: otlpsink.ForwardConfig{Endpoint: "collector:4317", Protocol: "grpc", Insecure: true,
				Headers: map[string]string{"authorization": "Bearer x", "x-scope-orgid": "acme"}}, ok: true,
		},
		"unknown protocol": {
			env:     map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL: "thrift"`,
		},
		"malformed header": {
			env:     map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4317", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"},
			wantErr: `OTEL_EXPORTER_OTLP_HEADERS: "novalue"`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, k := range []string{"ENDPOINT", "PROTOCOL", "HEADERS", "INSECURE"} {
				t.Setenv("OTEL_EXPORTER_OTLP_"+k, "")
				t.Setenv("OTEL_EXPORTER_OTLP_TRACES_"+k, "")
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			got, ok, err := otlpsink.ForwardConfigFromEnv()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok {
				t.Fatalf("ok %v, err %v; want ok %v", ok, err, tc.ok)
			}
			if tc.ok {
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("config (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestTreeUntrustedInput: a span sent twice is shown once, and a span naming itself as its parent
// is shown under a missing parent; no input makes the tree loop.
func TestTreeUntrustedInput(t *testing.T) {
	tid := trace.TraceID{1}
	a, b := trace.SpanID{1}, trace.SpanID{2}
	now := time.Now()
	spans := []otlpsink.Span{
		{TraceID: tid, SpanID: a, Name: "root", Start: now, End: now.Add(time.Millisecond)},
		{TraceID: tid, SpanID: b, ParentID: a, Name: "child", Start: now, End: now.Add(time.Millisecond)},
		{TraceID: tid, SpanID: b, ParentID: a, Name: "child", Start: now, End: now.Add(time.Millisecond)}, // retried batch
		{TraceID: tid, SpanID: trace.SpanID{3}, ParentID: trace.SpanID{3}, Name: "self", Start: now, End: now},
	}
	roots := otlpsink.Tree(spans)
	count := 0
	var walk func([]*otlpsink.Node)
	walk = func(ns []*otlpsink.Node) {
		for _, n := range ns {
			if n.Span != nil {
				count++
			}
			walk(n.Children)
		}
	}
	walk(roots)
	if count != 3 {
		t.Fatalf("%d spans in the tree, want 3 (the duplicate once)", count)
	}
	if len(roots) != 2 || roots[1].Missing != (trace.SpanID{3}) && roots[0].Missing != (trace.SpanID{3}) {
		t.Fatalf("the self-parented span is not under a missing parent: %+v", roots)
	}
}
