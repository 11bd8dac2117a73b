package syncer

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/syncer/fight"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Which cluster a write goes to.
const (
	sideManagement = fight.SideManagement
	sideLocal      = fight.SideLocal
)

// pass is what one reconcile records about itself: the actions it took (span attribute) and
// when the watch event that caused it arrived (for the event-to-write lag).
type pass struct {
	actions []string
	eventAt time.Time
	// namespaces is how many local namespaces a fan-out pass looked at (-1: not one).
	namespaces int
}

// noteNamespaces records on the pass in ctx how many local namespaces it looked at.
func noteNamespaces(ctx context.Context, n int) {
	if p := passFrom(ctx); p != nil {
		p.namespaces = n
	}
}

type passKey struct{}

// actionsOf is the writes the pass in ctx made so far.
func actionsOf(ctx context.Context) []string {
	if p := passFrom(ctx); p != nil {
		return p.actions
	}
	return nil
}

func passFrom(ctx context.Context) *pass {
	p, _ := ctx.Value(passKey{}).(*pass)
	return p
}

// writeTimeout bounds one API write, well below the reconcile's timeout (reconcileTimeout): a
// write the API server does not answer fails on its own and the pass is retried, instead of
// holding a worker (and every request queued behind it) for the whole reconcile.
const writeTimeout = 15 * time.Second

// slowWrite is how long a write may take before the agent logs it: a write that slow says the
// API server, the network or the flow control in between is struggling.
const slowWrite = 2 * time.Second

// write performs one API write, bounded by writeTimeout, as a child span of the reconcile's span
// (when tracing), records it among the pass's actions, and observes the watch-event-to-write
// lag. A slow or failed write is logged with its duration.
func (r *Reconciler) write(ctx context.Context, side, action string, obj client.Object, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if r.Tracer != nil {
		var span trace.Span
		ctx, span = r.Tracer.Start(ctx, action, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			telemetry.AttrWriteSide.String(side),
			telemetry.AttrWriteVerb.String(action),
			telemetry.AttrWriteObject.String(obj.GetNamespace()+"/"+obj.GetName()),
		))
		defer span.End()
	}
	start := time.Now()
	err := fn(ctx)
	switch took := time.Since(start); {
	case err != nil && !apierrors.IsConflict(err): // a conflict is routine, and Reconcile logs it
		logr.FromContextOrDiscard(ctx).V(1).Info("write failed", "action", action, "cluster", side, "took", took.String(), "error", err.Error())
	case took > slowWrite:
		logr.FromContextOrDiscard(ctx).Info("slow write", "action", action, "cluster", side, "took", took.String(), "failed", err != nil)
	}
	if err != nil && r.Tracer != nil {
		span := trace.SpanFromContext(ctx)
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return r.afterWrite(ctx, action, err)
}

func (r *Reconciler) afterWrite(ctx context.Context, action string, err error) error {
	p := passFrom(ctx)
	if err != nil || p == nil {
		return err
	}
	p.actions = append(p.actions, action)
	if !p.eventAt.IsZero() {
		telemetry.WriteLag.WithLabelValues(r.Name(), action).Observe(time.Since(p.eventAt).Seconds())
	}
	return nil
}

// stamp records the first event time of a request not yet reconciled.
func (r *Reconciler) stamp(req reconcile.Request) {
	r.eventTimes.LoadOrStore(req.NamespacedName, time.Now())
}

func (r *Reconciler) takeEventTime(req reconcile.Request) time.Time {
	if v, ok := r.eventTimes.LoadAndDelete(req.NamespacedName); ok {
		return v
	}
	return time.Time{}
}

// beginPass starts recording a reconcile once both sides are read: the pass (actions, event
// time) and, when tracing, its span, parented by the trace context found on the remote object
// (the management-side trace) or else on the local copy, so that one change is one trace across
// clusters.
func (r *Reconciler) beginPass(ctx context.Context, eventAt time.Time, req reconcile.Request, remote, local *unstructured.Unstructured, localKey types.NamespacedName) (context.Context, func(state ObjectState)) {
	p := &pass{eventAt: eventAt, namespaces: -1}
	ctx = context.WithValue(ctx, passKey{}, p)
	if r.Tracer == nil {
		return ctx, func(ObjectState) {}
	}
	kv := []attribute.KeyValue{
		telemetry.AttrResource.String(r.Name()),
		telemetry.AttrRemote.String(req.String()),
		telemetry.AttrLocal.String(localKey.String()),
	}
	var parent string
	if local != nil {
		parent = local.GetAnnotations()[r.Keys.TraceParent]
		kv = append(kv, telemetry.AttrLocalGen.Int64(local.GetGeneration()))
	}
	if remote != nil {
		if tp := remote.GetAnnotations()[r.Keys.TraceParent]; tp != "" {
			parent = tp
		}
		kv = append(kv, telemetry.AttrRemoteGen.Int64(remote.GetGeneration()))
	}
	ctx = telemetry.ContextFromTraceparent(ctx, parent)
	ctx, span := r.Tracer.Start(ctx, "sync "+r.Name(), trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(kv...))
	return ctx, func(state ObjectState) {
		span.SetAttributes(telemetry.AttrActions.StringSlice(p.actions), telemetry.AttrOutcome.String(string(state)))
		if p.namespaces >= 0 {
			span.SetAttributes(telemetry.AttrFanOutNamespaces.Int(p.namespaces))
		}
		span.End()
	}
}

// setTraceparent writes the reconcile's trace context on the local copy being written, so that
// the regional controller continues the same trace.
func (r *Reconciler) setTraceparent(ctx context.Context, obj *unstructured.Unstructured) {
	tp := telemetry.Traceparent(ctx)
	if tp == "" {
		return
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[r.Keys.TraceParent] = tp
	obj.SetAnnotations(a)
}
