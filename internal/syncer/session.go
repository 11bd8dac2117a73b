package syncer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/compact"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// ErrNoSession is returned while the engine is not connected to management.
var ErrNoSession = errors.New("no management session")

// Start waits for management, then starts the management cache and warms every informer; it
// returns when ctx ends.
func (e *Engine) Start(ctx context.Context) error {
	defer e.localEvents.Shutdown()
	if !e.startJitter(ctx) {
		return nil
	}
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
	if e.remoteEvents, err = NewManagementEventRecorder(e.remoteConfig, remote.GetHTTPClient(), e.mgr.GetScheme(), e.cfg.Region, e.log.WithName("management-events")); err != nil {
		return fmt.Errorf("management events: %w", err)
	}
	defer e.remoteEvents.Shutdown()
	errc := make(chan error, 1)
	go func() { errc <- remote.Start(ctx) }()
	for i, gvk := range e.gvks {
		r := e.newReconciler(remote, e.cfg.Resources[i], gvk)
		e.reconcilers = append(e.reconcilers, r)
		e.kinds = append(e.kinds, &kind{r: r})
	}
	// Warm standby: informers for every kind on both sides start now, on every replica, and get
	// the kind's event handlers once. A kind that a cluster does not serve (its CRD is missing),
	// that the agent may not list, or whose cache does not sync is reported and retried; the
	// others go on.
	for i, k := range e.kinds {
		go e.warm(ctx, remote, i, k)
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

// startJitterRand draws the start jitter's wait in [0, limit) (tests replace it).
var startJitterRand atomic.Pointer[func(limit time.Duration) time.Duration]

func init() {
	n := rand.N[time.Duration]
	startJitterRand.Store(&n)
}

// startJitter waits a random time in [0, StartJitter) before the first request to management
// when the region has synced before (its management identity is recorded), so that a fleet
// restarted at once spreads its connections, identity checks and claims over StartJitter; a new
// region starts at once. It returns false when ctx ended first.
func (e *Engine) startJitter(ctx context.Context) bool {
	if e.cfg.StartJitter <= 0 {
		return true
	}
	if record, err := e.identity.recorded(ctx); err != nil || record == "" {
		return ctx.Err() == nil // a new region (or no record readable: the identity check will say why)
	}
	d := (*startJitterRand.Load())(e.cfg.StartJitter)
	e.log.Info("waiting before the first request to management (management.startJitter)", "wait", d.Round(time.Millisecond).String())
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
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
			e.connected.Store(false) // stopping, not an outage: nothing to log
			telemetry.ManagementConnected.Set(0)
			return
		case <-t.C:
		}
	}
}

func ping(disc discovery.DiscoveryInterface) error {
	_, err := disc.ServerVersion()
	return err
}

// setConnected records a probe's outcome. A change is the one line an outage writes when it
// starts and the one when it ends; the failures of single objects meanwhile are V(1).
func (e *Engine) setConnected(ok bool) {
	if e.connected.Swap(ok) != ok {
		now := time.Now()
		if ok {
			if since := e.disconnectedAt.Load(); since != nil {
				e.log.Info("management reachable again; syncing resumes", "host", e.remoteConfig.Host, "after", now.Sub(*since).Round(time.Second).String())
			} else {
				e.log.Info("management reachable", "host", e.remoteConfig.Host)
			}
		} else {
			e.disconnectedAt.Store(&now)
			e.log.Info("management unreachable: nothing is written to it and local copies are kept as they are until it answers again (per-object retries at V(1))", "host", e.remoteConfig.Host)
		}
	}
	if ok {
		telemetry.ManagementConnected.Set(1)
	} else {
		telemetry.ManagementConnected.Set(0)
	}
}

// managementBackoff paces the first connection to management: 0.5 s, doubling up to 10 s.
var managementBackoff = retry.Exponential(500*time.Millisecond, 10*time.Second)

// waitForManagement returns once management answers, or with ctx's error when ctx ends first.
func (e *Engine) waitForManagement(ctx context.Context, disc discovery.DiscoveryInterface) error {
	_ = retry.Until(ctx, managementBackoff, func(context.Context, time.Duration) (bool, error) {
		err := ping(disc)
		e.setConnected(err == nil)
		if err != nil {
			e.log.V(1).Info("management not reachable yet; local copies are kept as they are", "error", err.Error())
		}
		return err == nil, nil
	})
	return ctx.Err()
}

// newRemoteCluster builds the management cluster.Cluster, whose cache holds the configured kinds
// filtered server-side by the shard's label selector.
func (e *Engine) newRemoteCluster() (cluster.Cluster, error) {
	resync := e.cfg.ResyncPeriod
	opts := cache.Options{DefaultTransform: compact.Transform(e.gvks), SyncPeriod: &resync}
	if !e.mapper.Selector().Empty() {
		// Server-side: objects outside the selector are never sent to the agent. The cache
		// holds only the synced kinds, so one default selector serves them all.
		opts.DefaultLabelSelector = e.mapper.Selector()
	}
	remote, err := cluster.New(e.remoteConfig, func(o *cluster.Options) {
		o.Scheme = e.mgr.GetScheme()
		o.HTTPClient = e.remoteHTTP
		o.Logger = e.log.WithName("management")
		o.Cache = opts
		o.NewCache = compact.NewCache(e.gvks) // watch events decoded straight into the compact form
		o.Client = client.Options{Cache: &client.CacheOptions{Unstructured: true}}
	})
	if err != nil {
		return nil, fmt.Errorf("management cluster: %w", err)
	}
	return remote, nil
}

// RemoteKeys lists the keys of one kind's objects in the management cache: the shard as the agent
// sees it (objects outside the label selector are never there).
func (e *Engine) RemoteKeys(ctx context.Context, gvk schema.GroupVersionKind) ([]types.NamespacedName, error) {
	s := e.session.Load()
	if s == nil {
		return nil, ErrNoSession
	}
	return cachedKeys(ctx, (*s).GetCache(), gvk)
}

// storeInformer is what a controller-runtime cache's informer is: a client-go shared informer
// with its store.
type storeInformer interface {
	GetStore() toolscache.Store
}

// cachedKeys lists the keys of the objects of kind gvk in c, without reading the objects: a
// cache read deep-copies (for a compacted object: decodes) every object it returns, which for
// a shard of 10,000 objects costs a third of a second of CPU, where walking the keys costs
// microseconds.
func cachedKeys(ctx context.Context, c cache.Cache, gvk schema.GroupVersionKind) ([]types.NamespacedName, error) {
	inf, err := c.GetInformer(ctx, unstructuredFor(gvk))
	if err != nil {
		return nil, err
	}
	si, ok := inf.(storeInformer)
	if !ok {
		return nil, fmt.Errorf("the cache's informer of %s (%T) has no store", shard.KindName(gvk), inf)
	}
	raw := si.GetStore().ListKeys()
	keys := make([]types.NamespacedName, 0, len(raw))
	for _, k := range raw {
		ns, name, err := toolscache.SplitMetaNamespaceKey(k)
		if err != nil {
			return nil, fmt.Errorf("cache key %q of %s: %w", k, shard.KindName(gvk), err)
		}
		keys = append(keys, types.NamespacedName{Namespace: ns, Name: name})
	}
	return keys, nil
}
