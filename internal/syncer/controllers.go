package syncer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/backlog"
	"github.com/regionsync/regionsync/internal/syncer/fight"
)

// kind is one configured kind's event plumbing. Its event handlers are registered once, for the
// engine's lifetime, on the kind's informers (warm); each feeds the queue of the kind's controller
// while one runs (the shard claim is held) and does nothing otherwise. A lost and regained claim
// therefore stops and starts workers and queues, but never adds a handler to a shared informer:
// goroutines and per-event work stay flat over any number of claim flaps.
type kind struct {
	r *Reconciler
	// queue is the running controller's queue and its low-priority feed; nil while none runs.
	queue atomic.Pointer[backlog.Queue]
	// missed are the objects of live events that arrived while no queue ran (a warm standby's,
	// or a replica's between claim periods): the next claim period queues them ahead of its
	// full pass.
	missed missedEvents
}

// missedWindow is how old a missed live event may be and still be queued ahead of a new claim
// period's full pass: longer than any handover (a crash takeover waits out the local lease),
// short enough that a long-standing standby does not put the whole shard ahead of itself.
const missedWindow = time.Minute

// maxMissed bounds the missed events kept; beyond it, the oldest are dropped (the full pass still
// reconciles every object, only later).
const maxMissed = 4096

// missedEvents remembers requests of live events that found no queue, with when they arrived.
type missedEvents struct {
	mu sync.Mutex
	at map[reconcile.Request]time.Time
}

// add records req as missed at now; past maxMissed, entries older than missedWindow are dropped
// and, if still full, the oldest.
func (m *missedEvents) add(req reconcile.Request, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[reconcile.Request]time.Time{}
	}
	if _, ok := m.at[req]; !ok && len(m.at) >= maxMissed {
		var oldest reconcile.Request
		var oldestAt time.Time
		for r, t := range m.at {
			if now.Sub(t) > missedWindow {
				delete(m.at, r)
				continue
			}
			if oldestAt.IsZero() || t.Before(oldestAt) {
				oldest, oldestAt = r, t
			}
		}
		if len(m.at) >= maxMissed {
			delete(m.at, oldest)
		}
	}
	m.at[req] = now
}

// missed is a live event that found no queue: its request and when it arrived.
type missed struct {
	req reconcile.Request
	at  time.Time
}

// take returns the requests missed within missedWindow before now, most recent first, and
// forgets every missed request.
func (m *missedEvents) take(now time.Time) []missed {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]missed, 0, len(m.at))
	for r, t := range m.at {
		if now.Sub(t) <= missedWindow {
			out = append(out, missed{r, t})
		}
	}
	slices.SortFunc(out, func(a, b missed) int { return b.at.Compare(a.at) })
	m.at = nil
	return out
}

// reconcileTimeout bounds every reconcile: a read or write that hangs (a cache that cannot sync,
// an API server that does not answer) fails the pass, which is retried, instead of holding one
// of the kind's workers forever.
const reconcileTimeout = time.Minute

// RunControllers opens the write gate and runs every kind's controller until ctx ends (the
// claim is lost or the agent stops); the gate closes the moment ctx ends. The controllers'
// workers and queues live only as long as ctx; their event handlers were registered once, when
// the kind's informers first synced, and are reused by every claim period.
func (e *Engine) RunControllers(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-e.sessionReady:
	}
	// A refused (or never checked) management identity never opens the gate; the first claim
	// records the accepted one.
	if err := e.identity.recordAccepted(ctx, e.remoteConfig.Host); err != nil {
		return err
	}
	release := e.writes.Open()
	stop := context.AfterFunc(ctx, release) // losing the claim stops writes at once
	defer stop()
	defer release()
	var wg sync.WaitGroup
	for i, k := range e.kinds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.runController(ctx, i, k)
		}()
	}
	e.log.Info("syncing", "kinds", len(e.kinds))
	wg.Wait()
	return nil
}

// restartBackoff paces the restarts of a failed controller and the retries of a kind a cluster
// does not serve: 1 s, doubling up to a minute.
var restartBackoff = retry.Exponential(time.Second, time.Minute)

// runController runs one kind's controller once its informers have synced, until ctx ends; a
// controller that fails is reported and started again, alone.
func (e *Engine) runController(ctx context.Context, i int, k *kind) {
	select {
	case <-ctx.Done():
		return
	case <-k.r.available:
	}
	_ = retry.Until(ctx, restartBackoff, func(ctx context.Context, backoff time.Duration) (bool, error) {
		err := e.runControllerOnce(ctx, k)
		if ctx.Err() == nil {
			e.log.Error(err, "controller stopped; restarting", "field", fmt.Sprintf("resources[%d]", i), "resource", k.r.Name(), "backoff", backoff)
		}
		return false, nil
	})
}

// runControllerOnce builds the kind's controller and runs it until ctx ends. Its only source
// hands its queue to the kind's handlers, queues the live events that arrived without a queue
// (missedEvents) and every object of the kind in both caches at low priority (the pass a
// regained claim needs: what the previous holder left undone is not known).
func (e *Engine) runControllerOnce(ctx context.Context, k *kind) error {
	r := k.r
	var own atomic.Pointer[backlog.Queue]
	start := source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		// Event times stamped before this queue existed belong to no pending event of it.
		r.eventTimes.Clear()
		rq := &backlog.Queue{Q: q, Low: backlog.New(r.Name())}
		go rq.Low.Run(ctx, q)
		own.Store(rq)
		k.queue.Store(rq)
		// Live changes the replica saw without a queue (as a standby, during the handover)
		// first: the full pass below is queued low, behind them.
		// Their event times are kept: the watch-to-write lag then includes the handover.
		for _, m := range k.missed.take(time.Now()) {
			r.eventTimes.LoadOrStore(m.req.NamespacedName, m.at)
			q.Add(m.req)
		}
		return e.enqueueAll(ctx, r, rq.Low)
	})
	c, err := controller.NewUnmanaged("regionsync-"+strings.ToLower(r.Name()), controller.Options{
		Reconciler:              r,
		MaxConcurrentReconciles: r.Resource.Concurrency,
		SkipNameValidation:      ptr.To(true), // a regained claim builds the controller again
		UsePriorityQueue:        ptr.To(true), // live events before the initial list and resyncs (backlog.AddLow)
		CacheSyncTimeout:        cacheWaitTimeout,
		ReconciliationTimeout:   reconcileTimeout,
		LogConstructor: func(*reconcile.Request) logr.Logger {
			return r.Log
		},
	})
	if err == nil {
		err = c.Watch(start)
	}
	if err == nil {
		err = c.Start(ctx)
	}
	if q := own.Load(); q != nil {
		k.queue.CompareAndSwap(q, nil)
	}
	return err
}

// enqueueAll adds to the low-priority feed every shard object of r's kind in the management
// cache, the remote object of every marked local copy (a copy whose remote object is gone is
// an orphan to handle), and that of every unmarked object at a mapped name (listUnmarked: a copy
// sync-controller left may be paused, or its remote object gone).
func (e *Engine) enqueueAll(ctx context.Context, r *Reconciler, low *backlog.Feed) error {
	ctx, cancel := context.WithTimeout(ctx, cacheWaitTimeout)
	defer cancel()
	remote := &unstructured.UnstructuredList{}
	remote.SetGroupVersionKind(shard.ListGVK(r.GVK))
	if err := (*e.session.Load()).GetCache().List(ctx, remote); err != nil {
		return fmt.Errorf("listing %s in the management cache: %w", r.Name(), err)
	}
	for i := range remote.Items {
		if e.inShard(&remote.Items[i]) {
			low.Add(reconcile.Request{NamespacedName: objectRef(&remote.Items[i])})
		}
	}
	local := &unstructured.UnstructuredList{}
	local.SetGroupVersionKind(shard.ListGVK(r.GVK))
	if err := e.local.List(ctx, local, client.MatchingLabels{e.keys.Region: e.cfg.Region}); err != nil {
		return fmt.Errorf("listing local %s copies: %w", r.Name(), err)
	}
	for i := range local.Items {
		for _, req := range e.localRequests(r, &local.Items[i]) {
			low.Add(req)
		}
	}
	unmarked, err := r.listUnmarked(ctx)
	if err != nil {
		return fmt.Errorf("listing local %s objects without a region mark: %w", r.Name(), err)
	}
	for _, key := range unmarked {
		low.Add(reconcile.Request{NamespacedName: key})
	}
	return nil
}

// inShard reports whether a management object belongs to the region's shard by name.
func (e *Engine) inShard(o client.Object) bool {
	_, err := e.mapper.ToLocal(objectRef(o))
	return !errors.Is(err, shard.ErrNotInShard)
}

// kindHandler is one of a kind's event handlers on one informer: it maps an object to the
// requests it concerns and adds them, with their event time, to the kind's queue while one
// exists. Without a queue (the claim is not held) it only remembers the requests of live events
// (missedEvents), for the next claim period to queue first.
type kindHandler struct {
	k *kind
	// requests maps an object to the requests it concerns (none: ignored).
	requests func(client.Object) []reconcile.Request
}

var _ toolscache.ResourceEventHandler = kindHandler{}

// OnAdd enqueues the object's requests; those of an informer's initial list at low priority.
func (h kindHandler) OnAdd(obj any, isInInitialList bool) { h.enqueue(isInInitialList, obj) }

// OnUpdate enqueues the requests of both versions (a secret may change owner); a periodic resync
// (the same resourceVersion again) at low priority, so a live change never waits behind it.
func (h kindHandler) OnUpdate(oldObj, newObj any) {
	o, okOld := oldObj.(client.Object)
	n, okNew := newObj.(client.Object)
	resync := okOld && okNew && o.GetResourceVersion() == n.GetResourceVersion()
	h.enqueue(resync, oldObj, newObj)
}

// OnDelete enqueues the deleted object's requests.
func (h kindHandler) OnDelete(obj any) { h.enqueue(false, obj) }

func (h kindHandler) enqueue(low bool, objs ...any) {
	q := h.k.queue.Load()
	if q == nil && low {
		return // the next claim period's full pass covers these
	}
	for _, obj := range objs {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		o, ok := obj.(client.Object)
		if !ok {
			continue
		}
		for _, req := range h.requests(o) {
			if q == nil {
				h.k.missed.add(req, time.Now())
				continue
			}
			h.k.r.stamp(req)
			if low {
				q.Low.Add(req)
			} else {
				q.Add(req)
			}
		}
	}
}

// handlers are the kind's event handlers: on the management informer (shard objects), on the
// local informer (copies, mapped to their remote objects) and on each of its secrets' informers
// (mapped to their controlling object of the kind).
func (e *Engine) handlers(k *kind) (remote, local, secrets kindHandler) {
	gvk := k.r.GVK
	remote = kindHandler{k: k, requests: func(o client.Object) []reconcile.Request {
		if !e.inShard(o) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: objectRef(o)}}
	}}
	local = kindHandler{k: k, requests: func(o client.Object) []reconcile.Request {
		return e.localRequests(k.r, o)
	}}
	secrets = kindHandler{k: k, requests: func(o client.Object) []reconcile.Request {
		owner := metav1.GetControllerOf(o)
		if owner == nil || owner.Kind != gvk.Kind {
			return nil
		}
		if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != gvk.Group {
			return nil
		}
		return e.remoteRequest(types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name})
	}}
	return remote, local, secrets
}

// kindAvailable reports whether gvk is a configured kind whose informers have synced on both
// clusters (its cached reads answer at once).
func (e *Engine) kindAvailable(gvk schema.GroupVersionKind) bool {
	for _, r := range e.reconcilers {
		if r.GVK != gvk {
			continue
		}
		select {
		case <-r.available:
			return true
		default:
			return false
		}
	}
	return false
}

func (e *Engine) newReconciler(remote cluster.Cluster, res fleetspec.Resource, gvk schema.GroupVersionKind) *Reconciler {
	secrets := map[string]client.Reader{}
	for _, name := range res.Secrets {
		secrets[name] = e.secretCaches[name]
	}
	r := &Reconciler{
		Resource:            res,
		GVK:                 gvk,
		Region:              e.cfg.Region,
		Keys:                e.keys,
		Mapper:              e.mapper,
		Remote:              &gatedClient{Client: remote.GetClient(), gate: &e.writes},
		RemoteAPI:           remote.GetAPIReader(),
		Local:               &gatedClient{Client: e.local, gate: &e.writes},
		LocalAPI:            e.mgr.GetAPIReader(),
		Secrets:             secrets,
		ManagedKinds:        e.gvks,
		KindAvailable:       e.kindAvailable,
		ProtectedNamespaces: e.cfg.ProtectedNamespaces(),
		SameCluster:         e.sameCluster,
		UploadedSecrets:     UploadedSecretNames(e.cfg.Resources, e.mapper.RemoteSecretName),
		LocalEvents:         e.localEvents,
		RemoteEvents:        e.remoteEvents,
		SecretRecheck:       e.cfg.ResyncPeriod,
		Log:                 e.log.WithValues("resource", shard.KindName(gvk)),
		states:              newStateTracker(shard.KindName(gvk)),
		fights:              fight.NewTracker(),
		Tracer:              e.tracer,
		available:           make(chan struct{}),
	}
	if e.namespaces != nil {
		r.Namespaces = e.namespaces
	}
	r.Budget = r.newBudget(e.cfg.DeletionBudget)
	r.deletedEvents = newBulkEvents(e.localEvents, ReasonDeleted, "Delete", r.Name()+" fan-out copies deleted")
	r.createdEvents = newBulkEvents(e.localEvents, ReasonCreated, "Sync", r.Name()+" copies created from management")
	r.namespaceEvents = newBulkEvents(e.remoteEvents, ReasonNamespaceCreated, "Sync", "local namespaces created in region "+e.cfg.Region)
	return r
}

// localRequests maps a local object of r's kind to the remote objects it concerns: a fan-out
// copy to its source (remembered as a fan-out object), and any object to the remote object that
// maps to its name (an ordinary copy's, or one whose mapped name a fan-out copy holds).
func (e *Engine) localRequests(r *Reconciler, o client.Object) []reconcile.Request {
	reqs := e.remoteRequest(objectRef(o))
	if src, ok := r.fanOutSourceOf(o); ok && e.inShard(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace, Name: src.Name}}) {
		r.fanOutKeys.Store(src, struct{}{})
		if len(reqs) == 0 || reqs[0].NamespacedName != src {
			reqs = append(reqs, reconcile.Request{NamespacedName: src})
		}
	}
	return reqs
}

func (e *Engine) remoteRequest(local types.NamespacedName) []reconcile.Request {
	remote, err := e.mapper.ToRemote(local)
	if err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: remote}}
}
