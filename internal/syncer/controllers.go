package syncer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/pkg/config"
)

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

// restartBackoff paces the restarts of a failed controller and the retries of a kind a cluster
// does not serve: 1 s, doubling up to a minute.
var restartBackoff = retry.Exponential(time.Second, time.Minute)

// runController runs one kind's controller once its informers exist, until ctx ends; a
// controller that fails (its caches never sync) is reported and started again, alone.
func (e *Engine) runController(ctx context.Context, remote cluster.Cluster, i int, r *Reconciler) {
	select {
	case <-ctx.Done():
		return
	case <-r.available:
	}
	_ = retry.Until(ctx, restartBackoff, func(ctx context.Context, backoff time.Duration) (bool, error) {
		c, err := e.newController(remote, r)
		if err == nil {
			err = c.Start(ctx)
		}
		if ctx.Err() == nil {
			e.log.Error(err, "controller stopped; restarting", "field", fmt.Sprintf("resources[%d]", i), "resource", r.Name(), "backoff", backoff)
		}
		return false, nil
	})
}

func (e *Engine) newReconciler(remote cluster.Cluster, res config.ResourceConfig, gvk schema.GroupVersionKind) *Reconciler {
	secrets := map[string]client.Reader{}
	for _, name := range res.Secrets {
		secrets[name] = e.secretCaches[name]
	}
	budget := DeletionBudget{MaxFraction: *e.cfg.DeletionBudget.MaxFraction, MinObjects: *e.cfg.DeletionBudget.MinObjects, Window: e.cfg.DeletionBudget.Window.Duration}
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
		Log:                 e.log.WithValues("resource", shard.KindName(gvk)),
		states:              newStateTracker(shard.KindName(gvk)),
		fights:              newFightTracker(),
		Tracer:              e.tracer,
		available:           make(chan struct{}),
	}
	r.Budget = r.newBudget(budget)
	return r
}

func (e *Engine) newController(remote cluster.Cluster, r *Reconciler) (controller.Controller, error) {
	gvk, res := r.GVK, r.Resource
	c, err := controller.NewUnmanaged("regionsync-"+strings.ToLower(shard.KindName(gvk)), controller.Options{
		Reconciler:              r,
		MaxConcurrentReconciles: res.Concurrency,
		SkipNameValidation:      ptr.To(true), // a regained claim builds the controller again
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
