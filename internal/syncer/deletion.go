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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/budget"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// heldRequeue is how often a held deletion is looked at again.
const heldRequeue = 30 * time.Second

// remoteDeleting handles a terminating remote object: the local copy (or the namespace the agent
// created for it) is deleted first, within the deletion budget (a mass termination is held like
// a mass disappearance, the finalizer kept); once the copy is gone, the finalizer is released.
// An unmarked object at the mapped name (unmarked) is taken over for its deletion first when it
// is a copy sync-controller left; any other is left in the region.
func (r *Reconciler) remoteDeleting(ctx context.Context, remote, local, unmarked *unstructured.Unstructured) (reconcile.Result, error) {
	if local != nil && r.isMarked(local) {
		if !local.GetDeletionTimestamp().IsZero() {
			return reconcile.Result{}, nil // its deletion event brings us back
		}
		return r.budgetedDelete(ctx, objectRef(remote), local, false, "management object "+objectRef(remote).String()+" is being deleted")
	}
	if local == nil && unmarked != nil {
		if legacy, result, err := r.takeOverForDeletion(ctx, objectRef(remote), remote, unmarked); legacy || err != nil {
			return result, err
		}
	}
	return reconcile.Result{}, r.releaseFinalizer(ctx, remote, unmarked != nil)
}

// takeOverForDeletion takes over in place, so that it is deleted like any copy, an unmarked
// object at the mapped name whose remote object is gone (remote nil) or being deleted, when it is
// a copy sync-controller left for this shard: it carries no region's mark at all (an object
// marked for another region is that region's copy), it lives in a namespace created for it (the
// namespace's owner annotation names it, and its owner-kind annotation, when present, its kind),
// and, when the remote object is gone, its labels match the shard's label selector (a copy
// carries its management object's labels). The object gets the region's mark (and the remote UID
// when the remote object is there), in a write that fails when the object changed since it was
// read; its event brings the pass back, and the copy is then deleted with its namespace through
// the deletion budget, after management itself answered "not found" for a vanished object, or
// held, exactly as a copy regionsync made. legacy reports whether the object is such a copy; any
// other object is left alone. Protected namespaces never get here (skipUnmappable), and a paused
// copy is never taken over.
func (r *Reconciler) takeOverForDeletion(ctx context.Context, remoteKey types.NamespacedName, remote, unmarked *unstructured.Unstructured) (legacy bool, _ reconcile.Result, _ error) {
	if _, marked := unmarked.GetLabels()[r.Keys.Region]; marked {
		return false, reconcile.Result{}, nil
	}
	if remote == nil && !r.Mapper.MatchesLabels(unmarked.GetLabels()) {
		return false, reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	if err := r.LocalAPI.Get(ctx, types.NamespacedName{Name: unmarked.GetNamespace()}, ns); err != nil {
		return false, reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("reading local namespace %s: %w", unmarked.GetNamespace(), err))
	}
	if !r.ownsNamespace(ns, unmarked) {
		return false, reconcile.Result{}, nil
	}
	switch {
	case r.Keys.IsPaused(unmarked.GetAnnotations()):
		r.count(telemetry.DirectionDelete, telemetry.ResultPaused)
		return true, reconcile.Result{RequeueAfter: unmarkedRecheck}, nil
	case !unmarked.GetDeletionTimestamp().IsZero() || !ns.DeletionTimestamp.IsZero():
		return true, reconcile.Result{RequeueAfter: waitRequeue}, nil // going already: wait until it is gone
	}
	why := "management object " + remoteKey.String() + " no longer exists"
	marked := unmarked.DeepCopy()
	labels := marked.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[r.Keys.Region] = r.Region
	marked.SetLabels(labels)
	if remote != nil {
		why = "management object " + remoteKey.String() + " is being deleted"
		annotations := marked.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[r.Keys.RemoteUID] = string(remote.GetUID())
		marked.SetAnnotations(annotations)
	}
	err := r.write(ctx, sideLocal, "take over for deletion", marked, func(ctx context.Context) error {
		return r.Local.Patch(ctx, marked, client.MergeFromWithOptions(unmarked, client.MergeFromWithOptimisticLock{}))
	})
	if apierrors.IsNotFound(err) {
		return true, reconcile.Result{}, nil // gone meanwhile
	}
	if err != nil {
		r.countFailure(telemetry.DirectionDown, err)
		return true, reconcile.Result{}, fmt.Errorf("taking over local %s for its deletion: %w", objectRef(unmarked), err)
	}
	// The key stays listed until the local cache shows the marked copy: a pass before that
	// reads it directly (readListedUnmarked) instead of finding nothing at the mapped name.
	r.count(telemetry.DirectionDown, telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).Info("copy left by sync-controller taken over for its deletion", "reason", why)
	r.LocalEvents.Eventf(marked, nil, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
		"taken over for its deletion (%s): it lives in namespace %s, created for it", why, ns.Name)
	return true, reconcile.Result{}, nil
}

// orphaned handles a local copy whose remote object is not in the management cache. It is
// deleted only when the deletion budget allows it and management confirms the object is gone;
// an unreachable management cluster, an object moved out of the shard, or a mass disappearance
// deletes nothing.
func (r *Reconciler) orphaned(ctx context.Context, remoteKey types.NamespacedName, local *unstructured.Unstructured) (reconcile.Result, error) {
	if local == nil || !r.isMarked(local) || !local.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	if r.Keys.IsPaused(local.GetAnnotations()) {
		r.count(telemetry.DirectionDelete, telemetry.ResultPaused)
		return reconcile.Result{}, nil
	}
	return r.budgetedDelete(ctx, remoteKey, local, true, "management object "+remoteKey.String()+" no longer exists")
}

// budgetedDelete deletes the copy of remoteKey when the budget allows it or an operator released
// it. The budget comes first: it counts from the caches, so a held deletion costs no request. An
// orphan is deleted only after management itself answers "not found".
func (r *Reconciler) budgetedDelete(ctx context.Context, remoteKey types.NamespacedName, local *unstructured.Unstructured, orphan bool, why string) (reconcile.Result, error) {
	released := r.Keys.IsReleased(local.GetAnnotations()) && r.Budget.ReleaseUsable(local.GetUID())
	if !released {
		if allowed, result, err := r.budgetAllows(ctx, remoteKey, local); err != nil || !allowed {
			return result, err
		}
	}
	if orphan {
		// The cache says gone; ask management itself before deleting anything.
		live := r.newObject()
		err := r.RemoteAPI.Get(ctx, remoteKey, live)
		switch {
		case err == nil:
			if !r.Mapper.MatchesLabels(live.GetLabels()) {
				r.count(telemetry.DirectionDelete, telemetry.ResultHeld)
				r.LocalEvents.Eventf(local, nil, corev1.EventTypeWarning, ReasonOutOfShard, "Delete",
					"management object %s no longer matches the shard's label selector; the local copy is kept", remoteKey)
				return reconcile.Result{}, nil
			}
			return reconcile.Result{RequeueAfter: waitRequeue}, nil // the cache is behind
		case !apierrors.IsNotFound(err):
			return reconcile.Result{}, fmt.Errorf("confirming that %s is gone from management: %w", remoteKey, err)
		}
	}
	if released {
		why += " (deletion released with " + r.Keys.ReleaseDeletion + ")"
	}
	if err := r.deleteLocal(ctx, local, why); err != nil {
		return reconcile.Result{}, err
	}
	r.Budget.Deleted(remoteKey)
	if released {
		r.Budget.UseRelease(local.GetUID())
	}
	return reconcile.Result{}, nil
}

// budgetAllows asks the deletion budget about the deletion of the budget unit key (local is the
// copy a hold's event regards): allowed now, or not, with when to look again.
func (r *Reconciler) budgetAllows(ctx context.Context, key types.NamespacedName, local *unstructured.Unstructured) (bool, reconcile.Result, error) {
	v, wait, summary, err := r.Budget.Decide(ctx, key)
	switch {
	case err != nil:
		return false, reconcile.Result{}, fmt.Errorf("counting the deletion budget: %w", err)
	case v == budget.SettleVerdict:
		return false, reconcile.Result{RequeueAfter: max(wait, 100*time.Millisecond)}, nil
	case v == budget.Hold:
		r.count(telemetry.DirectionDelete, telemetry.ResultHeld)
		telemetry.DeletionsHeld.WithLabelValues(r.Name()).Set(float64(r.Budget.Held(ctx)))
		logr.FromContextOrDiscard(ctx).V(1).Info("deletion held by the deletion budget", "unit", key)
		if summary != nil {
			r.reportHold(ctx, summary, local)
		}
		return false, reconcile.Result{RequeueAfter: heldRequeue}, nil
	}
	return true, reconcile.Result{}, nil
}

// reportHold emits the summarizing Warning event of a kind's hold, regarding the held copy with
// the smallest local key (or this one): one event per kind per interval, not one per held copy.
func (r *Reconciler) reportHold(ctx context.Context, s *budget.Summary, local *unstructured.Unstructured) {
	regarding := local
	if s.First.Name != "" {
		first := r.newObject()
		if err := r.Local.Get(ctx, s.First, first); err == nil {
			regarding = first
		}
	}
	msg := fmt.Sprintf("%d deletions of local %s copies held by the deletion budget (%d live copies, budget %d per %s; all of a kind's objects vanishing or terminating together is always held): "+
		"release one copy with the annotation %s=true, or every hold that started before a time with %s=<RFC 3339 time> on the Region %s",
		s.Held, r.Name(), s.Live, s.Limit, s.Window, r.Keys.ReleaseDeletion, r.Keys.ReleaseDeletionsBefore, r.Region)
	logr.FromContextOrDiscard(ctx).Info("deletions held by the deletion budget", "held", s.Held, "live", s.Live, "limit", s.Limit)
	r.LocalEvents.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonDeletionHeld, "Delete", "%s", msg)
}

// regionGVK is the kind of the Region on management.
var regionGVK = regionsyncv1alpha1.GroupVersion.WithKind("Region")

// releasedBefore reads the release time an operator set on the region's Region (zero: none).
func (r *Reconciler) releasedBefore(ctx context.Context) (time.Time, error) {
	region := &unstructured.Unstructured{}
	region.SetGroupVersionKind(regionGVK)
	if err := r.RemoteAPI.Get(ctx, types.NamespacedName{Name: r.Region}, region); err != nil {
		return time.Time{}, client.IgnoreNotFound(err)
	}
	v := region.GetAnnotations()[r.Keys.ReleaseDeletionsBefore]
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		r.Log.Info("ignoring an invalid release time on the Region", "annotation", r.Keys.ReleaseDeletionsBefore, "value", v, "error", err.Error())
		return time.Time{}, err
	}
	return t, nil
}

// newBudget builds the kind's budget gate: it counts from the caches and reads releases from
// the Region.
func (r *Reconciler) newBudget(b budget.Budget) *budget.Ledger {
	g := budget.NewLedger(b, r.census)
	g.ReleasedBefore = r.releasedBefore
	return g
}

// deleteLocal deletes the namespace the agent created for this object when nothing else it
// manages lives there, and otherwise the object itself. Both deletes carry a UID precondition.
func (r *Reconciler) deleteLocal(ctx context.Context, local *unstructured.Unstructured, why string) error {
	ns := &corev1.Namespace{}
	if err := r.LocalAPI.Get(ctx, types.NamespacedName{Name: local.GetNamespace()}, ns); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("reading local namespace %s: %w", local.GetNamespace(), err))
	}
	var target client.Object = local
	opts := make([]client.DeleteOption, 0, 2) // a propagation policy (not for a namespace) and the UID precondition
	opts = append(opts, client.PropagationPolicy(r.Resource.DeletePropagation))
	if r.ownsNamespace(ns, local) {
		if r.aloneInNamespace(ctx, local) {
			target, opts = ns, opts[:0]
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
	return r.Keys.OwnsNamespace(ns.Annotations, local.GetName(), r.Name())
}

// kindReadTimeout bounds the read of one kind in aloneInNamespace.
const kindReadTimeout = 10 * time.Second

// aloneInNamespace reports whether no other object of any managed kind is marked in the object's
// namespace (so deleting the namespace deletes nothing but this object's copy). Each kind is read
// within kindReadTimeout: from the cache when its informers have synced, else from the API
// server. A kind the local cluster does not serve has no object there; a kind that cannot be read
// (no RBAC, a timeout) makes the answer "not alone": only the object is deleted, the namespace is
// kept. One kind's trouble never stalls or fails another kind's deletions, and never loses data.
func (r *Reconciler) aloneInNamespace(ctx context.Context, local *unstructured.Unstructured) bool {
	for _, gvk := range r.ManagedKinds {
		others, err := r.othersInNamespace(ctx, gvk, local)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Info("cannot tell whether other managed objects live in the namespace; deleting the object, keeping its namespace",
				"namespace", local.GetNamespace(), "kind", shard.KindName(gvk), "error", err.Error())
			return false
		}
		if others {
			return false
		}
	}
	return true
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

// census walks the kind's marked local copies (in the shard, not terminating locally) and
// finds the doomed ones: their remote object is gone from the management cache or terminating.
// Paused copies are never deleted, so never doomed.
func (r *Reconciler) census(ctx context.Context) (budget.Census, error) {
	c := budget.Census{Doomed: map[types.NamespacedName]types.NamespacedName{}}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(r.GVK))
	if err := r.Local.List(ctx, list, client.MatchingLabels{r.Keys.Region: r.Region}); err != nil {
		return c, err
	}
	fan := fanOutCensus{sources: map[types.NamespacedName]*fanOutSource{}}
	for i := range list.Items {
		local := &list.Items[i]
		if source, ok := r.fanOutSourceOf(local); ok {
			if err := r.countFanOutCopy(ctx, &c, &fan, source, local); err != nil {
				return c, err
			}
			continue
		}
		if r.isFanOutCopy(local) {
			continue // a fan-out copy whose marks do not agree: never deleted
		}
		remoteKey, err := r.Mapper.ToRemote(objectRef(local))
		if err != nil || !local.GetDeletionTimestamp().IsZero() {
			continue // not a copy of this shard's objects, or already being deleted
		}
		c.Live++
		if r.Keys.IsPaused(local.GetAnnotations()) {
			continue
		}
		remote := r.newObject()
		switch err := r.Remote.Get(ctx, remoteKey, remote); {
		case apierrors.IsNotFound(err):
			c.Doomed[remoteKey] = objectRef(local)
		case err != nil:
			return c, err
		case !remote.GetDeletionTimestamp().IsZero() && !r.Keys.IsPaused(remote.GetAnnotations()):
			c.Doomed[remoteKey] = objectRef(local)
		}
	}
	return c, nil
}

// deleteOrphan handles a copy whose remote object is gone: deleted, held or kept. An unmarked
// object at the mapped name is taken over for its deletion when it is a copy sync-controller
// left (takeOverForDeletion), and otherwise left alone.
func (r *Reconciler) deleteOrphan(ctx context.Context, s *scope) (done bool, err error) {
	if s.remote != nil {
		return false, nil
	}
	s.state = stateGone
	if s.local == nil && s.unmarked != nil {
		var legacy bool
		legacy, s.result, err = r.takeOverForDeletion(ctx, s.req.NamespacedName, nil, s.unmarked)
		if legacy {
			s.state = StatePending
		}
		return true, err
	}
	if s.local != nil {
		s.state = StatePending
	}
	s.result, err = r.orphaned(ctx, s.req.NamespacedName, s.local)
	return true, err
}

// followRemoteDeletion deletes the copy of a terminating remote object, then releases it.
func (r *Reconciler) followRemoteDeletion(ctx context.Context, s *scope) (done bool, err error) {
	if s.remote.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	s.state = StatePending
	s.result, err = r.remoteDeleting(ctx, s.remote, s.local, s.unmarked)
	return true, err
}
