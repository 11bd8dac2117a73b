package syncer

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/budget"
	"github.com/regionsync/regionsync/internal/syncer/fight"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// inSyncReconciler returns a reconciler whose one object is in sync on both sides, over
// in-memory clients: the benchmark measures the agent's own CPU on the reconcile path (what
// tracing instrumentation could add), not an API server's.
func inSyncReconciler(b *testing.B, tracer trace.Tracer) (*Reconciler, ctrl.Request) {
	b.Helper()
	gvk := schema.GroupVersionKind{Group: "demo.regionsync.dev", Version: "v1alpha1", Kind: "Tenant"}
	keys := shard.NewKeys("regionsync.dev")
	mapper, _ := shard.NewMapper(fleetspec.Shard{RemoteResourceSuffix: "-us"})
	remote := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
		"metadata": map[string]any{
			"namespace": "acme", "name": "acme-us", "uid": "remote-uid", "generation": int64(3),
			"finalizers":  []any{keys.Finalizer},
			"labels":      map[string]any{"tier": "gold"},
			"annotations": map[string]any{keys.RemoteGeneration: "3", keys.LocalGeneration: "2"},
		},
		"spec":   map[string]any{"displayName": "Acme", "plan": "team", "replicas": int64(2)},
		"status": map[string]any{"phase": "Ready", "observedGeneration": int64(2)},
	}}
	local := desiredReplace(remote, nil, types.NamespacedName{Namespace: "acme", Name: "acme"}, keys, "us")
	local.SetUID("local-uid")
	local.SetGeneration(2)
	local.Object["status"] = map[string]any{"phase": "Ready", "observedGeneration": int64(2)}
	s := testenv.Scheme()
	remoteClient := fake.NewClientBuilder().WithScheme(s).WithObjects(remote).Build()
	localClient := fake.NewClientBuilder().WithScheme(s).WithObjects(local).Build()
	r := &Reconciler{
		Resource: fleetspec.Resource{Strategy: fleetspec.StrategyReplace}, GVK: gvk, Region: "us",
		Keys: keys, Mapper: mapper,
		Remote: remoteClient, RemoteAPI: remoteClient, Local: localClient, LocalAPI: localClient,
		Log: logr.Discard(), states: newStateTracker("Tenant.demo.regionsync.dev"), fights: fight.NewTracker(), Tracer: tracer,
	}
	r.Budget = r.newBudget(budget.Budget{MaxFraction: 0.5})
	return r, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "acme", Name: "acme-us"}}
}

func timeReconciles(b *testing.B, r *Reconciler, req ctrl.Request, n int) time.Duration {
	ctx := context.Background()
	start := time.Now()
	for range n {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkReconcileTracingOverhead reconciles an object in sync (the steady state: no writes)
// with three tracers and reports each one's cost as a ratio against the reconciler without any
// tracing code (Tracer nil, equivalent to a build without tracing), measured interleaved in the
// same run:
//   - off/none: tracing off (the no-op provider the agent uses when no endpoint is configured);
//   - on/none: tracing on, every reconcile sampled and recorded in memory (for information).
func BenchmarkReconcileTracingOverhead(b *testing.B) {
	none, req := inSyncReconciler(b, nil)
	off, _ := inSyncReconciler(b, noop.NewTracerProvider().Tracer("bench"))
	on, _ := inSyncReconciler(b, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder())).Tracer("bench"))
	const chunk = 200
	var tNone, tOff, tOn time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i += chunk {
		tNone += timeReconciles(b, none, req, chunk)
		tOff += timeReconciles(b, off, req, chunk)
		tOn += timeReconciles(b, on, req, chunk)
	}
	b.ReportMetric(float64(tOff)/float64(tNone), "off/none")
	b.ReportMetric(float64(tOn)/float64(tNone), "on/none")
	b.ReportMetric(float64(tNone.Nanoseconds())/float64(max(b.N, chunk)), "ns/reconcile-none")
}
