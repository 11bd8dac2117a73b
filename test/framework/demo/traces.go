package demo

import (
	"context"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/regionsync/regionsync/test/framework/otlpsink"
)

// DemoService is the service.name of the demo's own spans (the management-side change).
const DemoService = "regionsync-demo"

// startReceiver starts the demo's OTLP receiver; when OTEL_EXPORTER_OTLP_ENDPOINT is set it
// forwards what it receives there too.
func startReceiver() (*otlpsink.Receiver, error) {
	var fwd *otlpsink.Forwarder
	cfg, ok, err := otlpsink.ForwardConfigFromEnv()
	if err != nil {
		return nil, err
	}
	if ok {
		if fwd, err = otlpsink.NewForwarder(cfg); err != nil {
			return nil, err
		}
	}
	r, err := otlpsink.Start(otlpsink.Options{Forward: fwd})
	if err != nil && fwd != nil {
		fwd.Close()
	}
	return r, err
}

// newDemoTracer exports the demo's spans to its own receiver with the real OTLP/gRPC exporter,
// synchronously (a span is received when it ends).
func newDemoTracer(ctx context.Context, recv *otlpsink.Receiver) (trace.Tracer, func(context.Context) error, error) {
	return recv.Tracer(ctx, DemoService, "demo", Management)
}

// waitTrace waits until a region's trace holds the tenant operator's span and the agent's status
// upload and then received nothing new for a second, or until timeout; it returns what arrived.
// Waiting never adds anything: the tree is printed from the received spans only.
func waitTrace(ctx context.Context, recv *otlpsink.Receiver, id trace.TraceID, timeout time.Duration) []otlpsink.Span {
	deadline := time.Now().Add(timeout)
	var spans []otlpsink.Span
	quietSince := time.Now()
	for {
		got := recv.Trace(id)
		if len(got) != len(spans) {
			quietSince = time.Now()
		}
		spans = got
		var operator, upload bool
		for _, s := range spans {
			operator = operator || s.Resource["service.name"] == "tenant-operator"
			upload = upload || s.Name == "upload status"
		}
		if (operator && upload && time.Since(quietSince) >= time.Second) || time.Now().After(deadline) {
			return spans
		}
		select {
		case <-ctx.Done():
			return spans
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// printTrace prints a region's trace tree.
func printTrace(out io.Writer, region string, spans []otlpsink.Span) error {
	fmt.Fprintf(out, "%s: the trace of this change, as received by the demo's OTLP receiver:\n", region)
	return otlpsink.PrintTrace(out, "  ", spans)
}
