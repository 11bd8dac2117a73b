package syncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/pkg/config"
)

// EventSource is the reporting controller of the agent's Kubernetes Events.
const EventSource = "regionsync-agent"

// GVKs returns the configured kinds.
func GVKs(cfg *config.AgentConfig) []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, len(cfg.Resources))
	for i, r := range cfg.Resources {
		out[i] = schema.GroupVersionKind{Group: r.Group, Version: r.Version, Kind: r.Kind}
	}
	return out
}

func unstructuredFor(gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u
}

// localPrototype is the object the engine watches a kind with in the local cache: the host's Go
// type for a typed kind (sharing the host's informer), else unstructured.
func (e *Engine) localPrototype(gvk schema.GroupVersionKind) (client.Object, error) {
	if !e.typed[gvk] {
		return unstructuredFor(gvk), nil
	}
	obj, err := e.mgr.GetScheme().New(gvk)
	if err != nil {
		return nil, fmt.Errorf("typed %s: %w", KindName(gvk), err)
	}
	o, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("typed %s is not a client.Object", KindName(gvk))
	}
	return o, nil
}

// LocalCacheOptions are the local manager's cache options: the managed kinds are cached only
// when they carry this region's mark, so the agent's memory does not grow with unrelated objects.
// Namespaces and unmarked objects are read directly, on the create path only.
func LocalCacheOptions(cfg *config.AgentConfig) cache.Options {
	keys := shard.NewKeys(cfg.AnnotationDomain)
	resync := cfg.ResyncPeriod.Duration
	// A default selector rather than one per kind: the cache then needs no REST mapping at
	// construction, so a kind whose CRD is missing cannot stop the agent from starting. The
	// manager's cache holds only the managed kinds (namespaces are read directly, secrets have
	// caches of their own).
	return cache.Options{
		DefaultLabelSelector: labels.SelectorFromSet(labels.Set{keys.Region: cfg.Region}),
		DefaultTransform:     cache.TransformStripManagedFields(),
		SyncPeriod:           &resync,
	}
}

// Engine owns the agent's connection to management and runs one controller per configured kind.
//
// The engine itself runs on every replica (NeedLeaderElection is false): it waits for
// management, starts the management cache and warms the local informers, so a standby that
// becomes leader does not re-list anything. The controllers run only through RunControllers,
// which the leader calls while it holds the region's shard claim.
type Engine struct {
	cfg          *config.AgentConfig
	mgr          manager.Manager
	remoteConfig *rest.Config
	keys         shard.Keys
	mapper       *shard.Mapper
	gvks         []schema.GroupVersionKind
	secretCaches map[string]cache.Cache
	log          logr.Logger
	// typed are the kinds the host caches as Go types; local is the engine's client of the
	// local cluster (cached reads of the managed kinds, typed ones converted).
	typed map[schema.GroupVersionKind]bool
	local client.Client

	connected atomic.Bool
	// session is the management cluster, set once management has answered.
	session      atomic.Pointer[cluster.Cluster]
	sessionReady chan struct{}
	// reconcilers, one per kind, built with the session (read-only once sessionReady is
	// closed) and kept so that object states survive a lost and regained claim.
	reconcilers []*Reconciler
	// writes gates every write to management: open only while the shard claim is held.
	writes WriteGate
	tracer trace.Tracer
}

// ErrNoSession is returned while the engine is not connected to management.
var ErrNoSession = errors.New("no management session")

// RemoteKeys lists the keys of one kind's objects in the management cache: the shard as the agent
// sees it (objects outside the label selector are never there).
func (e *Engine) RemoteKeys(ctx context.Context, gvk schema.GroupVersionKind) ([]types.NamespacedName, error) {
	s := e.session.Load()
	if s == nil {
		return nil, ErrNoSession
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := (*s).GetCache().List(ctx, list); err != nil {
		return nil, err
	}
	keys := make([]types.NamespacedName, len(list.Items))
	for i := range list.Items {
		keys[i] = objectRef(&list.Items[i])
	}
	return keys, nil
}

// ProtectedNamespaces are the local namespaces of cfg's namespace scope: the system namespaces,
// the agent's own (its leader-election namespace) and the configured exclusions.
func ProtectedNamespaces(cfg *config.AgentConfig) sets.Set[string] {
	return sets.New(cfg.ProtectedNamespaces()...)
}

// Params are what NewEngine needs.
type Params struct {
	// Config is the validated, defaulted configuration.
	Config *config.AgentConfig
	// Manager is the local (host) manager; its cache may be filtered (LocalCacheOptions) or not.
	Manager manager.Manager
	// Management is the management cluster's client config.
	Management *rest.Config
	// Typed are the configured kinds the host caches as Go types (registered in its scheme).
	Typed map[schema.GroupVersionKind]bool
	Log   logr.Logger
	// Tracer traces every reconcile and write; nil runs no tracing code at all.
	Tracer trace.Tracer
}

// NewEngine builds the engine and adds it, and the caches of the configured local secrets, to
// the local manager.
func NewEngine(p Params) (*Engine, error) {
	cfg, mgr := p.Config, p.Manager
	mapper, err := shard.NewMapper(cfg.Shard)
	if err != nil {
		return nil, err
	}
	local, err := newLocalClient(mgr, p.Typed)
	if err != nil {
		return nil, fmt.Errorf("local client: %w", err)
	}
	e := &Engine{
		cfg: cfg, mgr: mgr, remoteConfig: p.Management, log: p.Log,
		keys: shard.NewKeys(cfg.AnnotationDomain), mapper: mapper, gvks: GVKs(cfg),
		secretCaches: map[string]cache.Cache{}, sessionReady: make(chan struct{}), tracer: p.Tracer,
		typed: p.Typed, local: local,
	}
	// One small cache per secret name, selected by field: the agent never caches other Secrets.
	for _, res := range cfg.Resources {
		for _, name := range res.Secrets {
			if _, ok := e.secretCaches[name]; ok {
				continue
			}
			c, err := cache.New(mgr.GetConfig(), cache.Options{
				Scheme:     mgr.GetScheme(),
				Mapper:     mgr.GetRESTMapper(),
				HTTPClient: mgr.GetHTTPClient(),
				ByObject: map[client.Object]cache.ByObject{
					&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", name)},
				},
				DefaultTransform: cache.TransformStripManagedFields(),
			})
			if err != nil {
				return nil, fmt.Errorf("cache of local secrets named %s: %w", name, err)
			}
			if err := mgr.Add(c); err != nil {
				return nil, err
			}
			e.secretCaches[name] = c
		}
	}
	if err := mgr.Add(e); err != nil {
		return nil, err
	}
	return e, nil
}

// NeedLeaderElection is false: every replica connects and keeps warm caches.
func (e *Engine) NeedLeaderElection() bool { return false }

// ManagementConnected reports whether the last probe of management succeeded.
func (e *Engine) ManagementConnected() bool { return e.connected.Load() }

// SessionReady is closed once the management cache has been started.
func (e *Engine) SessionReady() <-chan struct{} { return e.sessionReady }

// ManagementConfig is the rest.Config the engine uses for management.
func (e *Engine) ManagementConfig() *rest.Config { return e.remoteConfig }

// Writes is the gate of every write to management.
func (e *Engine) Writes() *WriteGate { return &e.writes }

// Start waits for management, then starts the management cache and warms every informer; it
// returns when ctx ends.
func (e *Engine) Start(ctx context.Context) error {
	disc, err := discovery.NewDiscoveryClientForConfig(withTimeout(e.remoteConfig, 5*time.Second))
	if err != nil {
		return fmt.Errorf("management client: %w", err)
	}
	go e.probe(ctx, disc)
	if err := e.waitForManagement(ctx, disc); err != nil {
		return nil // ctx done
	}
	remote, err := e.newRemoteCluster()
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- remote.Start(ctx) }()
	for i, gvk := range e.gvks {
		e.reconcilers = append(e.reconcilers, e.newReconciler(remote, e.cfg.Resources[i], gvk))
	}
	// Warm standby: informers for every kind on both sides start now, on every replica. A kind
	// that a cluster does not serve (its CRD is missing) is reported and retried; the others go on.
	for i, r := range e.reconcilers {
		go e.warm(ctx, remote, i, r)
	}
	e.session.Store(&remote)
	close(e.sessionReady)
	e.log.Info("connected to management; caches warming", "host", e.remoteConfig.Host, "kinds", len(e.gvks))
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("management cache stopped: %w", err)
	}
}

func withTimeout(cfg *rest.Config, d time.Duration) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Timeout = d
	return c
}

// probe keeps the management-connected state and metric current.
func (e *Engine) probe(ctx context.Context, disc discovery.DiscoveryInterface) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		e.setConnected(ping(disc) == nil)
		select {
		case <-ctx.Done():
			e.setConnected(false)
			return
		case <-t.C:
		}
	}
}

func ping(disc discovery.DiscoveryInterface) error {
	_, err := disc.ServerVersion()
	return err
}

func (e *Engine) setConnected(ok bool) {
	if e.connected.Swap(ok) != ok {
		e.log.Info("management connection changed", "connected", ok, "host", e.remoteConfig.Host)
	}
	if ok {
		telemetry.ManagementConnected.Set(1)
	} else {
		telemetry.ManagementConnected.Set(0)
	}
}

func (e *Engine) waitForManagement(ctx context.Context, disc discovery.DiscoveryInterface) error {
	wait := 500 * time.Millisecond
	for {
		err := ping(disc)
		e.setConnected(err == nil)
		if err == nil {
			return nil
		}
		e.log.V(1).Info("management not reachable yet; local copies are kept as they are", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// newRemoteCluster builds the management cluster.Cluster, whose cache holds the configured kinds
// filtered server-side by the shard's label selector.
func (e *Engine) newRemoteCluster() (cluster.Cluster, error) {
	resync := e.cfg.ResyncPeriod.Duration
	opts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), SyncPeriod: &resync}
	if !e.mapper.Selector().Empty() {
		// Server-side: objects outside the selector are never sent to the agent. The cache
		// holds only the synced kinds, so one default selector serves them all.
		opts.DefaultLabelSelector = e.mapper.Selector()
	}
	remote, err := cluster.New(e.remoteConfig, func(o *cluster.Options) {
		o.Scheme = e.mgr.GetScheme()
		o.Logger = e.log.WithName("management")
		o.Cache = opts
		o.Client = client.Options{Cache: &client.CacheOptions{Unstructured: true}}
	})
	if err != nil {
		return nil, fmt.Errorf("management cluster: %w", err)
	}
	return remote, nil
}

// RunControllers runs every kind's controller until ctx ends (the claim is lost or the agent
// stops). Writes to management pass only while the write gate is open.
func (e *Engine) RunControllers(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-e.sessionReady:
	}
	remote := *e.session.Load()
	var wg sync.WaitGroup
	for i, r := range e.reconcilers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.runController(ctx, remote, i, r)
		}()
	}
	e.log.Info("syncing", "kinds", len(e.reconcilers))
	wg.Wait()
	return nil
}

// runController runs one kind's controller once its informers exist, until ctx ends; a
// controller that fails (its caches never sync) is reported and started again, alone.
func (e *Engine) runController(ctx context.Context, remote cluster.Cluster, i int, r *Reconciler) {
	select {
	case <-ctx.Done():
		return
	case <-r.available:
	}
	backoff := time.Second
	for ctx.Err() == nil {
		c, err := e.newController(remote, r)
		if err == nil {
			err = c.Start(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		e.log.Error(err, "controller stopped; restarting", "field", fmt.Sprintf("resources[%d]", i), "resource", r.Name(), "backoff", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// warm starts the kind's informers on both clusters, retrying while a cluster does not serve the
// kind, and then marks the kind available.
func (e *Engine) warm(ctx context.Context, remote cluster.Cluster, i int, r *Reconciler) {
	backoff := time.Second
	for {
		_, err := remote.GetCache().GetInformer(ctx, unstructuredFor(r.GVK))
		side := "management"
		if err == nil {
			var proto client.Object
			if proto, err = e.localPrototype(r.GVK); err == nil {
				_, err = e.mgr.GetCache().GetInformer(ctx, proto)
			}
			side = "the local cluster"
		}
		if err == nil {
			close(r.available)
			return
		}
		e.log.Error(err, "kind not served; retrying (the other kinds are not affected)",
			"field", fmt.Sprintf("resources[%d]", i), "resource", r.Name(), "cluster", side, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// Stats returns each kind's object counts (empty until management has been reached).
func (e *Engine) Stats() []Stats {
	select {
	case <-e.sessionReady:
	default:
		return nil
	}
	out := make([]Stats, 0, len(e.reconcilers))
	for _, r := range e.reconcilers {
		out = append(out, r.Stats())
	}
	return out
}

func (e *Engine) newReconciler(remote cluster.Cluster, res config.ResourceConfig, gvk schema.GroupVersionKind) *Reconciler {
	secrets := map[string]client.Reader{}
	for _, name := range res.Secrets {
		secrets[name] = e.secretCaches[name]
	}
	budget := DeletionBudget{MaxFraction: *e.cfg.DeletionBudget.MaxFraction, MinObjects: *e.cfg.DeletionBudget.MinObjects}
	r := &Reconciler{
		Resource:            res,
		GVK:                 gvk,
		Region:              e.cfg.Region,
		Keys:                e.keys,
		Mapper:              e.mapper,
		Remote:              &gatedClient{Client: remote.GetClient(), gate: &e.writes},
		RemoteAPI:           remote.GetAPIReader(),
		Local:               e.local,
		LocalAPI:            e.mgr.GetAPIReader(),
		Secrets:             secrets,
		ManagedKinds:        e.gvks,
		ProtectedNamespaces: ProtectedNamespaces(e.cfg),
		LocalEvents:         e.mgr.GetEventRecorder(EventSource),
		RemoteEvents:        remote.GetEventRecorder(EventSource),
		SecretRecheck:       e.cfg.ResyncPeriod.Duration,
		Log:                 e.log.WithValues("resource", KindName(gvk)),
		states:              newStateTracker(KindName(gvk)),
		Tracer:              e.tracer,
		available:           make(chan struct{}),
	}
	r.Budget = newBudgetGate(budget, r.countOrphans)
	return r
}

func (e *Engine) newController(remote cluster.Cluster, r *Reconciler) (controller.Controller, error) {
	gvk, res := r.GVK, r.Resource
	c, err := controller.NewUnmanaged("regionsync-"+strings.ToLower(KindName(gvk)), controller.Options{
		Reconciler:              r,
		MaxConcurrentReconciles: res.Concurrency,
		SkipNameValidation:      ptrTo(true), // a regained claim builds the controller again
		CacheSyncTimeout:        2 * time.Minute,
		LogConstructor: func(*reconcile.Request) logr.Logger {
			return r.Log
		},
	})
	if err != nil {
		return nil, err
	}
	inShard := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, err := e.mapper.ToLocal(objectRef(o))
		return !errors.Is(err, shard.ErrNotInShard)
	})
	stamped := func(h handler.EventHandler) handler.EventHandler { return stampingHandler{inner: h, stamp: r.stamp} }
	if err := c.Watch(source.Kind[client.Object](remote.GetCache(), unstructuredFor(gvk), stamped(&handler.EnqueueRequestForObject{}), inShard)); err != nil {
		return nil, err
	}
	toRemote := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return e.remoteRequest(objectRef(o))
	})
	proto, err := e.localPrototype(gvk)
	if err != nil {
		return nil, err
	}
	if err := c.Watch(source.Kind[client.Object](e.mgr.GetCache(), proto, stamped(toRemote))); err != nil {
		return nil, err
	}
	secretOwner := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		owner := metav1.GetControllerOf(o)
		if owner == nil || owner.Kind != gvk.Kind {
			return nil
		}
		if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != gvk.Group {
			return nil
		}
		return e.remoteRequest(types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name})
	})
	for _, name := range res.Secrets {
		if err := c.Watch(source.Kind[client.Object](e.secretCaches[name], &corev1.Secret{}, stamped(secretOwner))); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (e *Engine) remoteRequest(local types.NamespacedName) []reconcile.Request {
	remote, err := e.mapper.ToRemote(local)
	if err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: remote}}
}
