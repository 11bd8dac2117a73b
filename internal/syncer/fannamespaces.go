package syncer

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// namespacePrototype is the object the namespace cache watches namespaces with: metadata only
// (names, labels, deletion), so a region's namespaces cost little memory.
func namespacePrototype() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// addNamespaceCache adds to mgr a cache of the region's namespaces (metadata only, started on
// every replica) when a configured kind fans out; nil otherwise (the agent then never lists
// namespaces).
func addNamespaceCache(mgr manager.Manager, cfg *Settings) (cache.Cache, error) {
	fanOut := false
	for _, r := range cfg.Resources {
		fanOut = fanOut || r.FanOutEnabled()
	}
	if !fanOut {
		return nil, nil
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		HTTPClient:       mgr.GetHTTPClient(),
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(standbyCache{c}); err != nil {
		return nil, err
	}
	return c, nil
}

// sameCluster reports whether management is the local cluster itself: management's identity
// (its kube-system namespace UID, as the identity check observed it) is the local kube-system's.
func (e *Engine) sameCluster(ctx context.Context) bool {
	observed := e.identity.State().Observed
	if e.namespaces == nil || observed == "" {
		return false
	}
	ns := namespacePrototype()
	if err := e.namespaces.Get(ctx, types.NamespacedName{Name: metav1.NamespaceSystem}, ns); err != nil {
		return false
	}
	return string(ns.UID) == observed
}

// namespaceHandler queues a kind's fan-out objects when a namespace is created, deleted, or
// changes its labels or starts terminating: its copy may be due, or due to go. The informer's
// initial list queues nothing (a claim period's full pass covers every object).
type namespaceHandler struct{ k *kind }

var _ toolscache.ResourceEventHandler = namespaceHandler{}

// OnAdd queues the kind's fan-out objects for a new namespace.
func (h namespaceHandler) OnAdd(obj any, isInInitialList bool) {
	if !isInInitialList {
		h.enqueue(obj)
	}
}

// OnUpdate queues them when the namespace's labels changed or it started terminating.
func (h namespaceHandler) OnUpdate(oldObj, newObj any) {
	o, okOld := oldObj.(client.Object)
	n, okNew := newObj.(client.Object)
	if okOld && okNew && maps.Equal(o.GetLabels(), n.GetLabels()) && o.GetDeletionTimestamp().IsZero() == n.GetDeletionTimestamp().IsZero() {
		return
	}
	h.enqueue(newObj)
}

// OnDelete queues them for a deleted namespace.
func (h namespaceHandler) OnDelete(obj any) { h.enqueue(obj) }

// enqueue queues every fan-out object of the kind, each with the namespace noted: its next pass
// may look at that namespace only (fanOutNarrowPass). A namespace the event does not name (a
// tombstone of an unknown kind) leaves the next pass a full one.
func (h namespaceHandler) enqueue(obj any) {
	q := h.k.queue.Load()
	if q == nil {
		return // the next claim period's full pass covers them
	}
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	ns := ""
	if o, ok := obj.(client.Object); ok {
		ns = o.GetName()
	}
	h.k.r.fanOutKeys.Range(func(key types.NamespacedName, _ struct{}) bool {
		h.k.r.fanOutPending.add(key, ns)
		req := reconcile.Request{NamespacedName: key}
		h.k.r.stamp(req)
		q.Add(req)
		return true
	})
}
