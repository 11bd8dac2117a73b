package syncer

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// heldRequeue is how often a held deletion is looked at again.
const heldRequeue = 30 * time.Second

// remoteDeleting handles a terminating remote object: the local copy (or the namespace the agent
// created for it) is deleted first; once it is gone, the finalizer is released.
func (r *Reconciler) remoteDeleting(ctx context.Context, remote, local *unstructured.Unstructured) (ctrl.Result, error) {
	if local != nil && r.isMarked(local) {
		if local.GetDeletionTimestamp().IsZero() {
			return ctrl.Result{}, r.deleteLocal(ctx, local, "management object "+objectRef(remote).String()+" is being deleted")
		}
		return ctrl.Result{}, nil // its deletion event brings us back
	}
	if !controllerutil.ContainsFinalizer(remote, r.Keys.Finalizer) {
		return ctrl.Result{}, nil
	}
	before := remote.DeepCopy()
	controllerutil.RemoveFinalizer(remote, r.Keys.Finalizer)
	err := r.write(ctx, sideManagement, "release finalizer", remote, func(ctx context.Context) error {
		return r.Remote.Patch(ctx, remote, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		r.countFailure(telemetry.DirectionDelete, err)
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("releasing finalizer of %s: %w", objectRef(remote), err))
	}
	r.count(telemetry.DirectionDelete, telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).Info("local copy gone; remote finalizer released")
	return ctrl.Result{}, nil
}

// orphaned handles a local copy whose remote object is not in the management cache. It is
// deleted only when management confirms the object is gone and the deletion budget allows it;
// an unreachable management cluster, an object moved out of the shard, or a mass disappearance
// deletes nothing.
func (r *Reconciler) orphaned(ctx context.Context, remoteKey types.NamespacedName, local *unstructured.Unstructured) (ctrl.Result, error) {
	if local == nil || !r.isMarked(local) || !local.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	if r.Keys.IsPaused(local.GetAnnotations()) {
		r.count(telemetry.DirectionDelete, telemetry.ResultPaused)
		return ctrl.Result{}, nil
	}
	log := logr.FromContextOrDiscard(ctx)
	// The budget first: it counts from the caches, so a mass disappearance (the case it exists
	// for) costs management no request per held copy.
	if !r.Keys.IsReleased(local.GetAnnotations()) {
		allowed, orphans, managed, err := r.Budget.Check(ctx)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !allowed {
			r.count(telemetry.DirectionDelete, telemetry.ResultHeld)
			telemetry.DeletionsHeld.WithLabelValues(r.Name()).Set(float64(orphans))
			msg := fmt.Sprintf("management no longer lists %s, but %d of %d local %s copies are orphaned, beyond the deletion budget (%d): deletion held; annotate %s=true to release",
				remoteKey, orphans, managed, r.Name(), r.Budget.budget.Limit(managed), r.Keys.ReleaseDeletion)
			log.Info("deletion held by the deletion budget", "orphans", orphans, "managed", managed)
			r.LocalEvents.Eventf(local, nil, corev1.EventTypeWarning, ReasonDeletionHeld, "Delete", "%s", msg)
			return ctrl.Result{RequeueAfter: heldRequeue}, nil
		}
	}
	// The cache says gone; ask management itself before deleting anything.
	live := r.newObject()
	err := r.RemoteAPI.Get(ctx, remoteKey, live)
	switch {
	case err == nil:
		if !r.Mapper.MatchesLabels(live.GetLabels()) {
			r.count(telemetry.DirectionDelete, telemetry.ResultHeld)
			r.LocalEvents.Eventf(local, nil, corev1.EventTypeWarning, ReasonOutOfShard, "Delete",
				"management object %s no longer matches the shard's label selector; the local copy is kept", remoteKey)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{RequeueAfter: waitRequeue}, nil // the cache is behind
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("confirming that %s is gone from management: %w", remoteKey, err)
	}
	return ctrl.Result{}, r.deleteLocal(ctx, local, "management object "+remoteKey.String()+" no longer exists")
}

// deleteLocal deletes the namespace the agent created for this object when nothing else it
// manages lives there, and otherwise the object itself. Both deletes carry a UID precondition.
func (r *Reconciler) deleteLocal(ctx context.Context, local *unstructured.Unstructured, why string) error {
	ns := &corev1.Namespace{}
	if err := r.LocalAPI.Get(ctx, types.NamespacedName{Name: local.GetNamespace()}, ns); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("reading local namespace %s: %w", local.GetNamespace(), err))
	}
	var target client.Object = local
	opts := []client.DeleteOption{client.PropagationPolicy(r.Resource.DeletePropagation)}
	if r.ownsNamespace(ns, local) {
		alone, err := r.aloneInNamespace(ctx, local)
		if err != nil {
			return err
		}
		if alone {
			target, opts = ns, nil
		}
	}
	if !ns.DeletionTimestamp.IsZero() && target == client.Object(ns) {
		return nil
	}
	uid := target.GetUID()
	opts = append(opts, client.Preconditions{UID: &uid})
	action := "delete local"
	if target == client.Object(ns) {
		action = "delete namespace"
	}
	if err := r.write(ctx, sideLocal, action, target, func(ctx context.Context) error { return r.Local.Delete(ctx, target, opts...) }); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // already gone, or replaced by another object: nothing of ours to delete
		}
		r.count(telemetry.DirectionDelete, telemetry.ResultError)
		return fmt.Errorf("deleting local %s: %w", objectRef(target), err)
	}
	r.count(telemetry.DirectionDelete, telemetry.ResultWritten)
	what := "local copy"
	if target == client.Object(ns) {
		what = "local namespace " + ns.Name
	}
	logr.FromContextOrDiscard(ctx).Info("deleted "+what, "reason", why)
	r.LocalEvents.Eventf(local, nil, corev1.EventTypeNormal, ReasonDeleted, "Delete", "deleted %s: %s", what, why)
	return nil
}

// ownsNamespace reports whether the agent created ns for this object (and this kind: a namespace
// created by sync-controller carries only the owner name, which is accepted).
func (r *Reconciler) ownsNamespace(ns *corev1.Namespace, local *unstructured.Unstructured) bool {
	a := ns.Annotations
	if a[r.Keys.Owner] != local.GetName() {
		return false
	}
	kind, ok := a[r.Keys.OwnerKind]
	return !ok || kind == r.Name()
}

// kindReadTimeout bounds the read of one kind in aloneInNamespace.
const kindReadTimeout = 10 * time.Second

// aloneInNamespace reports whether no other object of any managed kind is marked in the object's
// namespace (so deleting the namespace deletes nothing but this object's copy). Each kind is read
// within kindReadTimeout: from the cache when its informers have synced, else from the API
// server. A kind the local cluster does not serve has no object there; a kind that cannot be read
// (no RBAC, a timeout) makes the answer "not alone": only the object is deleted, the namespace is
// kept. One kind's trouble never stalls or fails another kind's deletions, and never loses data.
func (r *Reconciler) aloneInNamespace(ctx context.Context, local *unstructured.Unstructured) (bool, error) {
	for _, gvk := range r.ManagedKinds {
		others, err := r.othersInNamespace(ctx, gvk, local)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Info("cannot tell whether other managed objects live in the namespace; deleting the object, keeping its namespace",
				"namespace", local.GetNamespace(), "kind", shard.KindName(gvk), "error", err.Error())
			return false, nil
		}
		if others {
			return false, nil
		}
	}
	return true, nil
}

// othersInNamespace reports whether an object of kind gvk other than local is marked in local's
// namespace.
func (r *Reconciler) othersInNamespace(ctx context.Context, gvk schema.GroupVersionKind, local *unstructured.Unstructured) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, kindReadTimeout)
	defer cancel()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(gvk))
	opts := []client.ListOption{client.InNamespace(local.GetNamespace()), client.MatchingLabels{r.Keys.Region: r.Region}}
	var reader client.Reader = r.Local
	if gvk != r.GVK && (r.KindAvailable == nil || !r.KindAvailable(gvk)) {
		// Its cache has not synced (and may never): the API server answers, or says why not.
		reader, opts = r.LocalAPI, append(opts, client.Limit(2))
	}
	err := reader.List(ctx, list, opts...)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return false, nil // the local cluster does not serve the kind: none of it can be there
	case err != nil:
		return false, fmt.Errorf("listing local %s in %s: %w", shard.KindName(gvk), local.GetNamespace(), err)
	}
	for i := range list.Items {
		if list.Items[i].GetUID() != local.GetUID() {
			return true, nil
		}
	}
	return false, nil
}

// countOrphans walks the kind's marked local copies and counts those whose remote object the
// management cache does not hold.
func (r *Reconciler) countOrphans(ctx context.Context) (orphans, managed int, err error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(r.GVK))
	if err := r.Local.List(ctx, list, client.MatchingLabels{r.Keys.Region: r.Region}); err != nil {
		return 0, 0, err
	}
	for i := range list.Items {
		remoteKey, err := r.Mapper.ToRemote(objectRef(&list.Items[i]))
		if err != nil {
			continue // not a copy of this shard's objects
		}
		managed++
		obj := r.newObject()
		if err := r.Remote.Get(ctx, remoteKey, obj); apierrors.IsNotFound(err) {
			orphans++
		} else if err != nil {
			return 0, 0, err
		}
	}
	return orphans, managed, nil
}
