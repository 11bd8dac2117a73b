// Package tracer builds the OpenTelemetry tracer providers of regionsync's processes (the agent,
// the demo tenant operator): the OTLP exporter from the configuration or the standard OTEL_*
// variables, and the resource attributes. The library (pkg/regionsync) never imports it: a host
// passes its own tracer provider.
package tracer

import (
	"context"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/utils/ptr"

	"github.com/regionsync/regionsync/internal/fleetspec"
)

// ServiceName is the OpenTelemetry service.name of the agent.
const ServiceName = "regionsync-agent"

// TracingEnabled reports whether traces are exported: an endpoint in the configuration or in the
// standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables, and OTEL_SDK_DISABLED not "true".
func TracingEnabled(t fleetspec.Tracing) bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return t.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Identity is what the resource attributes say about the process.
type Identity struct {
	// ServiceName defaults to regionsync-agent.
	ServiceName                  string
	Version, Region, ClusterName string
}

// NewTracerProvider returns the agent's tracer provider and its shutdown function. With tracing
// off it is a no-op provider: no exporter, no span is ever recorded.
func NewTracerProvider(ctx context.Context, t fleetspec.Tracing, id Identity) (trace.TracerProvider, func(context.Context) error, error) {
	if !TracingEnabled(t) {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	var opts []otlptracegrpc.Option
	if t.Endpoint != "" {
		endpoint, insecure := t.Endpoint, t.Insecure
		switch {
		case strings.HasPrefix(endpoint, "http://"):
			endpoint, insecure = strings.TrimPrefix(endpoint, "http://"), true
		case strings.HasPrefix(endpoint, "https://"):
			endpoint = strings.TrimPrefix(endpoint, "https://")
		}
		opts = append(opts, otlptracegrpc.WithEndpoint(endpoint))
		if insecure {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
	} // else the exporter reads the standard OTEL_EXPORTER_OTLP_* variables itself
	exporter, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	return newSDKProvider(sdktrace.NewBatchSpanProcessor(exporter), ptr.Deref(t.SamplingRatio, fleetspec.DefaultSamplingRatio), id)
}

// NewTestTracerProvider is NewTracerProvider with a given span processor (tests record spans in
// memory or export them synchronously).
func NewTestTracerProvider(sp sdktrace.SpanProcessor, id Identity) (trace.TracerProvider, func(context.Context) error, error) {
	return newSDKProvider(sp, 1, id)
}

func newSDKProvider(sp sdktrace.SpanProcessor, ratio float64, id Identity) (trace.TracerProvider, func(context.Context) error, error) {
	if id.ServiceName == "" {
		id.ServiceName = ServiceName
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName(id.ServiceName),
		semconv.ServiceVersion(id.Version),
		semconv.CloudRegion(id.Region),
		semconv.K8SClusterName(id.ClusterName),
	))
	if err != nil {
		// Schema URL conflicts between the default and ours: fall back to ours alone.
		res = resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(id.ServiceName),
			semconv.ServiceVersion(id.Version), semconv.CloudRegion(id.Region), semconv.K8SClusterName(id.ClusterName))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	return tp, tp.Shutdown, nil
}
