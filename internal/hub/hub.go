// Package hub is regionsync's management-side controller manager (docs/design/hub.md#hub-and-distribution):
// it places each Distribution, one object in many regions, by writing the per-region objects the
// regions' agents sync, reports one status per Distribution, and judges every region's heartbeat.
// cmd/hub only wires it; the rules it shares with the agents (mapping, keys, shard) are
// internal/shard's.
package hub

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer/compact"
)

// Options configure the hub's controllers.
type Options struct {
	// AnnotationDomain is the fleet's annotation domain (default regionsync.dev).
	AnnotationDomain string
	// Namespace holds the regions' shard Leases (default regionsync-system).
	Namespace string
	// LivenessGrace is added to a shard Lease's duration before a region is judged silent.
	LivenessGrace time.Duration
	// ShrinkWindow is the shrink guard's window.
	ShrinkWindow time.Duration
	// Concurrency is the number of Distributions reconciled at once.
	Concurrency int
	// DefaultServiceAccountName is the ServiceAccount the hub writes as for a Distribution that
	// names none (empty: such a Distribution places nothing).
	DefaultServiceAccountName string
	// AllowSecrets lets Distributions place Secrets (as template or source).
	AllowSecrets bool
	// TracerProvider traces every reconcile (nil: no tracing).
	TracerProvider trace.TracerProvider
}

// OptionsFromConfig maps the hub's configuration file to Options.
func OptionsFromConfig(c *Config) Options {
	return Options{
		AnnotationDomain: c.AnnotationDomain, Namespace: c.Namespace, LivenessGrace: c.Liveness.Grace.Duration,
		ShrinkWindow: c.ShrinkGuard.Window.Duration, Concurrency: c.Concurrency,
		DefaultServiceAccountName: c.DefaultServiceAccountName, AllowSecrets: c.AllowSecrets,
	}
}

// CacheOptions are the manager cache's options the hub needs: only the shard Leases of the
// fleet's namespace are cached, and no object's managedFields (the hub never reads them; a
// Distribution's status entries each leave one in them).
func CacheOptions(o Options) cache.Options {
	o = o.WithDefaults()
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: {
			Namespaces: map[string]cache.Config{o.Namespace: {}},
			Label:      labels.SelectorFromSet(labels.Set{claim.LeaseLabel: "true"}),
		},
	}}
}

// WithDefaults returns o with every unset field at its default: the one place the hub's
// defaults are applied (the configuration file leaves every field it shares with Options to it).
func (o Options) WithDefaults() Options {
	o.AnnotationDomain = cmp.Or(o.AnnotationDomain, fleetspec.DefaultAnnotationDomain)
	o.Namespace = cmp.Or(o.Namespace, fleetspec.DefaultManagementNamespace)
	o.LivenessGrace = cmp.Or(o.LivenessGrace, DefaultLivenessGrace)
	o.ShrinkWindow = cmp.Or(o.ShrinkWindow, DefaultShrinkWindow)
	o.Concurrency = cmp.Or(o.Concurrency, DefaultConcurrency)
	return o
}

// Validate applies the defaults and checks o, naming every invalid field by its Options name
// ("livenessGrace", "shrinkWindow"); the configuration file runs it on its Options and names the
// file's fields.
func (o Options) Validate() error {
	o = o.WithDefaults()
	var errs field.ErrorList
	errs = append(errs, fleetspec.ValidateAnnotationDomain(field.NewPath("annotationDomain"), o.AnnotationDomain)...)
	errs = append(errs, fleetspec.ValidateDNSLabel(field.NewPath("namespace"), o.Namespace)...)
	if g := o.LivenessGrace; g < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("livenessGrace"), g.String(), "must be at least 1s"))
	}
	if w := o.ShrinkWindow; w < time.Second {
		errs = append(errs, field.Invalid(field.NewPath("shrinkWindow"), w.String(), "must be at least 1s"))
	}
	if o.Concurrency < 1 {
		errs = append(errs, field.Invalid(field.NewPath("concurrency"), o.Concurrency, "must be at least 1"))
	}
	if n := o.DefaultServiceAccountName; n != "" {
		for _, msg := range validation.IsDNS1123Subdomain(n) {
			errs = append(errs, field.Invalid(field.NewPath("defaultServiceAccountName"), n, msg))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &fleetspec.ValidationError{Errors: errs}
}

// Setup adds the hub's controllers to a manager (whose cache was built with CacheOptions): the
// Distribution controller, with its own cache of per-region objects (only those labelled
// D/distribution, kept warm on every replica), and the region liveness controller; and registers
// the hub's metrics in controller-runtime's registry.
func Setup(mgr ctrl.Manager, o Options) error {
	o = o.WithDefaults()
	if err := registerMetrics(); err != nil {
		return fmt.Errorf("hub: registering metrics: %w", err)
	}
	keys := shard.NewKeys(o.AnnotationDomain)
	owned, err := labels.NewRequirement(keys.Distribution, selection.Exists, nil)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	// The per-region objects are cached in the agents' compact form (internal/syncer/compact:
	// typed metadata, interned keys and short values, the rest as its JSON, no managedFields),
	// which every Get and List expands back into the unstructured object the API server sent.
	// Nothing reads the cache without that copy (UnsafeDisableDeepCopy would hand out the
	// compact form). The Distributions' ControllerRevisions, typed, lose their managedFields.
	// Their watches are decoded straight into that form (compact.NewCacheAllUnstructured).
	watchErrs := &watchErrors{}
	objects, err := compact.NewCacheAllUnstructured()(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultLabelSelector: labels.NewSelector().Add(*owned),
		DefaultTransform:     compact.TransformAllUnstructured(),
		// A kind the hub may not list or watch is named in its Distributions' Applied condition.
		DefaultWatchErrorHandler: watchErrs.handle,
	})
	if err != nil {
		return fmt.Errorf("hub: the per-region objects' cache: %w", err)
	}
	if err := mgr.Add(warmCache{objects}); err != nil {
		return err
	}
	sources, err := newSourceCache(mgr)
	if err != nil {
		return fmt.Errorf("hub: the source objects' cache: %w", err)
	}
	if err := mgr.Add(warmCache{sources}); err != nil {
		return err
	}
	guard := &ShrinkGuard{Window: o.ShrinkWindow, Store: &ConfigMapGuardStore{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Key: types.NamespacedName{Namespace: o.Namespace, Name: GuardConfigMapName},
	}}
	tp := o.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	d := &DistributionReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Objects: objects, Keys: keys,
		Recorder: mgr.GetEventRecorder("regionsync-hub"), Guard: guard, Sources: sources, AllowSecrets: o.AllowSecrets,
		Tracer: tp.Tracer("regionsync-hub"), Concurrency: o.Concurrency,
		Writers:                   NewWriters(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()}),
		DefaultServiceAccountName: o.DefaultServiceAccountName,
		watchErrs:                 watchErrs,
	}
	if err := d.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := mgr.Add(&kindWarmer{cache: mgr.GetCache(), d: d}); err != nil {
		return err
	}
	l := &LivenessReconciler{Client: mgr.GetClient(), Namespace: o.Namespace, Grace: o.LivenessGrace}
	if err := l.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// warmCache runs the per-region objects' cache on every replica, so that a standby taking over
// lists nothing again (a bare cache added to a manager would start only on the leader).
type warmCache struct{ cache.Cache }

// NeedLeaderElection is false: the cache runs on every replica.
func (warmCache) NeedLeaderElection() bool { return false }

// kindWarmer, on every replica, watches the kinds every Distribution places (and the metadata of
// its source kind), so that they are cached before this replica leads.
type kindWarmer struct {
	cache cache.Cache
	d     *DistributionReconciler
}

// NeedLeaderElection is false: standbys warm up too.
func (*kindWarmer) NeedLeaderElection() bool { return false }

// Start registers a handler on the Distribution informer that watches each Distribution's kind.
func (w *kindWarmer) Start(ctx context.Context) error {
	inf, err := w.cache.GetInformer(ctx, &regionsyncv1alpha1.Distribution{})
	if err != nil {
		return fmt.Errorf("hub: watching Distributions: %w", err)
	}
	warm := func(obj any) {
		d, ok := obj.(*regionsyncv1alpha1.Distribution)
		if !ok {
			return
		}
		if gvk, err := SpecKind(d, w.d.Keys, w.d.AllowSecrets); err == nil {
			_, _ = w.d.ensureWatch(ctx, gvk)
			if d.Spec.Source != nil {
				_, _ = w.d.Sources.GetInformer(ctx, sourceMetadata(gvk), cache.BlockUntilSynced(false))
			}
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: warm, UpdateFunc: func(_, n any) { warm(n) }})
	if err != nil {
		return err
	}
	<-ctx.Done()
	return inf.RemoveEventHandler(reg)
}

// builderRegionPredicates lets through Region creations, deletions and changes of spec or
// labels, and of liveness (rollouts count a region down as a failure): not the agents' status
// heartbeats.
func builderRegionPredicates() builder.WatchesOption {
	return builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, regionLivenessChanged()))
}
