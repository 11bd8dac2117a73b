package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// propagator is W3C trace context, carried in one annotation.
var propagator = propagation.TraceContext{}

// ContextFromTraceparent returns ctx carrying the remote span context of a W3C traceparent value
// (an annotation); an empty or malformed value leaves ctx unchanged.
func ContextFromTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Traceparent returns the W3C traceparent of the span in ctx, or "" when there is none (tracing
// off or not sampled).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagator.Inject(ctx, carrier)
	return carrier["traceparent"]
}

// Attr helpers keep attribute names in one place.
var (
	AttrResource    = attribute.Key("regionsync.resource")
	AttrRemote      = attribute.Key("regionsync.remote")
	AttrLocal       = attribute.Key("regionsync.local")
	AttrRemoteGen   = attribute.Key("regionsync.remote_generation")
	AttrLocalGen    = attribute.Key("regionsync.local_generation")
	AttrActions     = attribute.Key("regionsync.actions")
	AttrOutcome     = attribute.Key("regionsync.state")
	AttrWriteVerb   = attribute.Key("regionsync.write")
	AttrWriteSide   = attribute.Key("regionsync.cluster")
	AttrWriteObject = attribute.Key("regionsync.object")
	// AttrFanOutNamespaces is the number of local namespaces a fan-out pass looked at: every
	// namespace for a full pass, the ones whose events queued it for a narrow one.
	AttrFanOutNamespaces = attribute.Key("regionsync.fanout.namespaces")
)
