package otlpsink

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracer returns a tracer whose spans reach r through the real OTLP/gRPC exporter, synchronously
// (a span is received when it ends), as the management side of a demo or test: service and
// instance name the process, cluster its k8s.cluster.name. shutdown flushes and stops it.
func (r *Receiver) Tracer(ctx context.Context, service, instance, cluster string) (_ trace.Tracer, shutdown func(context.Context) error, _ error) {
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(r.GRPCAddr()), otlptracegrpc.WithInsecure())
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP exporter to the receiver: %w", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.ServiceInstanceID(instance), semconv.K8SClusterName(cluster))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	return tp.Tracer(service), tp.Shutdown, nil
}
