// Rule: spec down. The local copy gets the remote's content, labels and annotations by the
// resource's strategy, in a namespace the agent creates when missing; an unmarked object at the
// mapped name is adopted or left alone.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/fight"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// specDownPhase writes the copy; the pass ends pending while there is none yet to set
// generations from (waiting, refused, failed), paused when the object at the mapped name turned
// out to be an unmarked paused one.
func (r *Reconciler) specDownPhase(ctx context.Context, s *scope) (done bool, err error) {
	if s.local == nil && s.foreign != nil {
		r.collision(ctx, s.remote, s.localKey)
		s.state, s.result = StatePending, reconcile.Result{RequeueAfter: unmarkedRecheck}
		return true, nil
	}
	s.local, s.result, err = r.specDown(ctx, s.remote, s.localKey, s.local, s.unmarked)
	if errors.Is(err, errUnmarkedPaused) {
		s.state = StatePaused
		r.count(telemetry.DirectionDown, telemetry.ResultPaused)
		return true, nil
	}
	if err != nil || s.local == nil {
		s.state = StatePending
		return true, err
	}
	return false, nil
}

// specDown creates or updates the local copy. It returns the local object after any write, or nil
// when there is none yet to set generations from (waiting, refused).
//
// unmarked is an object at the mapped name that carries no mark (read from a cache that is not
// filtered to marked objects); the adoption rules decide whether it becomes the copy.
func (r *Reconciler) specDown(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, local, unmarked *unstructured.Unstructured) (*unstructured.Unstructured, reconcile.Result, error) {
	if local == nil && unmarked != nil {
		existing, result, err := r.adoptOrRefuse(ctx, remote, localKey, unmarked)
		if err != nil || existing == nil {
			return nil, result, err
		}
		local = existing
	}
	if local == nil {
		fresh, result, err := r.ensureNamespace(ctx, remote, localKey)
		if err != nil || !result.IsZero() {
			return nil, result, err
		}
		// Replace creates first and looks only when something is there (a read saved per new
		// object). Apply must look first: a server-side apply would silently take over an
		// unmarked object. In a namespace just created nothing can be there.
		if !fresh && r.Resource.Strategy == fleetspec.StrategyApply {
			existing, result, err := r.lookupExisting(ctx, remote, localKey)
			if err != nil || existing == nil && !result.IsZero() {
				return nil, result, err
			}
			local = existing
		}
		if local == nil {
			created, err := r.writeLocal(ctx, remote, localKey, nil)
			switch {
			case apierrors.IsAlreadyExists(err):
				existing, result, err := r.lookupExisting(ctx, remote, localKey)
				if err != nil || existing == nil {
					return nil, reconcile.Result{RequeueAfter: max(result.RequeueAfter, waitRequeue)}, err
				}
				local = existing
			case err != nil:
				return nil, reconcile.Result{}, err
			default:
				r.rememberCreated(localKey, created)
				r.createdEvents.add(created, localKey.String(), "created from management object "+objectRef(remote).String())
				return created, reconcile.Result{}, nil
			}
		}
	}
	if !local.GetDeletionTimestamp().IsZero() {
		// Recreated once it is gone: its deletion is an event the agent receives (marked) or
		// polls for (unmarked).
		return nil, reconcile.Result{RequeueAfter: waitRequeue}, nil
	}
	updated, err := r.writeLocal(ctx, remote, localKey, local)
	return updated, reconcile.Result{}, err
}

// namespaceMemo is how long a local namespace seen to exist is trusted without reading it again.
const namespaceMemo = 30 * time.Second

// ensureNamespace makes sure the copy's local namespace exists, creating it (owned by this
// object) when it does not; fresh reports that it was just created. A namespace being deleted
// is waited for.
func (r *Reconciler) ensureNamespace(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName) (fresh bool, _ reconcile.Result, _ error) {
	if v, ok := r.namespaces.Load(localKey.Namespace); ok && time.Since(v) < namespaceMemo {
		return false, reconcile.Result{}, nil
	}
	ns := &corev1.Namespace{}
	err := r.LocalAPI.Get(ctx, types.NamespacedName{Name: localKey.Namespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        localKey.Namespace,
			Labels:      map[string]string{r.Keys.Region: r.Region},
			Annotations: map[string]string{r.Keys.Owner: localKey.Name, r.Keys.OwnerKind: r.Name()},
		}}
		err := r.write(ctx, sideLocal, "create namespace", ns, func(ctx context.Context) error {
			return r.Local.Create(ctx, ns, client.FieldOwner(shard.FieldManager))
		})
		if apierrors.IsAlreadyExists(err) {
			return false, reconcile.Result{}, nil // someone else just created it: not ours
		}
		if err != nil {
			return false, reconcile.Result{}, fmt.Errorf("creating local namespace %s: %w", localKey.Namespace, err)
		}
		r.namespaces.Store(localKey.Namespace, time.Now())
		r.namespaceEvents.add(remote, localKey.Namespace, fmt.Sprintf("created local namespace %s in region %s", localKey.Namespace, r.Region))
		return true, reconcile.Result{}, nil
	case err != nil:
		return false, reconcile.Result{}, fmt.Errorf("reading local namespace %s: %w", localKey.Namespace, err)
	case !ns.DeletionTimestamp.IsZero():
		return false, reconcile.Result{RequeueAfter: waitRequeue}, nil
	}
	r.namespaces.Store(localKey.Namespace, time.Now())
	return false, reconcile.Result{}, nil
}

// lookupExisting reads an object at the mapped name that the cache cannot see (unmarked, or not
// cached yet). It returns it when it is to be synced (ours, or adopted), or nil with a non-zero
// result to wait (terminating, adoption refused), or nil and a zero result when there is none.
func (r *Reconciler) lookupExisting(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName) (*unstructured.Unstructured, reconcile.Result, error) {
	existing := r.newObject()
	if err := r.LocalAPI.Get(ctx, localKey, existing); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, reconcile.Result{}, nil
		}
		return nil, reconcile.Result{}, fmt.Errorf("reading local %s: %w", localKey, err)
	}
	if !existing.GetDeletionTimestamp().IsZero() {
		return nil, reconcile.Result{RequeueAfter: waitRequeue}, nil
	}
	if r.isMarked(existing) && r.isFanOutCopy(existing) {
		r.collision(ctx, remote, localKey)
		return nil, reconcile.Result{RequeueAfter: unmarkedRecheck}, nil
	}
	if r.isMarked(existing) {
		return existing, reconcile.Result{}, nil // ours; the cache has not seen it yet
	}
	return r.adoptOrRefuse(ctx, remote, localKey, existing)
}

// collision reports an ordinary copy whose mapped name a fan-out copy of another management
// object holds: that copy is left alone, and this object waits until it is gone.
func (r *Reconciler) collision(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName) {
	r.count(telemetry.DirectionDown, telemetry.ResultRefused)
	msg := fmt.Sprintf("local %s is a namespace fan-out copy of another management object; it is not overwritten", localKey)
	logr.FromContextOrDiscard(ctx).Info("mapped name taken by a fan-out copy", "local", localKey)
	r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonFanOutCollision, "Sync", "%s in region %s", msg, r.Region)
}

// adoptOrRefuse applies the adoption rules to an unmarked local object at the mapped name: it is
// taken over when adoption is configured, or when it lives in a namespace the agent (or
// sync-controller, under the same annotation domain) created for this very object, the migration
// path; otherwise it is left alone, reported, and looked at again later. A paused object is
// neither taken over nor adopted (errUnmarkedPaused).
func (r *Reconciler) adoptOrRefuse(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, existing *unstructured.Unstructured) (*unstructured.Unstructured, reconcile.Result, error) {
	if !existing.GetDeletionTimestamp().IsZero() {
		return nil, reconcile.Result{RequeueAfter: waitRequeue}, nil
	}
	if r.Keys.IsPaused(existing.GetAnnotations()) {
		// Paused locally: never taken over (skipPaused stops the pass earlier when the pass
		// read this object before its first write).
		return nil, reconcile.Result{RequeueAfter: unmarkedRecheck}, errUnmarkedPaused
	}
	ns := &corev1.Namespace{}
	if err := r.LocalAPI.Get(ctx, types.NamespacedName{Name: localKey.Namespace}, ns); err != nil {
		return nil, reconcile.Result{}, fmt.Errorf("reading local namespace %s: %w", localKey.Namespace, err)
	}
	if r.ownsNamespace(ns, existing) {
		r.LocalEvents.Eventf(existing, nil, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
			"taken over for management object %s: it lives in namespace %s, created for it", objectRef(remote), ns.Name)
		return existing, reconcile.Result{}, nil
	}
	if r.Resource.Adoption != fleetspec.AdoptionAdopt {
		r.count(telemetry.DirectionDown, telemetry.ResultRefused)
		msg := fmt.Sprintf("local %s exists and is not managed by regionsync; adoption is refused by configuration", localKey)
		r.LocalEvents.Eventf(existing, nil, corev1.EventTypeWarning, ReasonAdoptionRefused, "Adopt", "%s", msg)
		r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonAdoptionRefused, "Adopt", "%s in region %s", msg, r.Region)
		return nil, reconcile.Result{RequeueAfter: unmarkedRecheck}, nil
	}
	r.LocalEvents.Eventf(existing, nil, corev1.EventTypeNormal, ReasonAdopted, "Adopt", "adopted for management object %s", objectRef(remote))
	return existing, reconcile.Result{}, nil
}

// writeLocal writes the local copy with the resource's strategy when it differs from the remote.
// live is nil to create. It returns the local object as it is after the write.
func (r *Reconciler) writeLocal(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, live *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return r.writeCopy(ctx, remote, localKey, live, objectRef(remote), nil)
}

// writeCopy is writeLocal for any copy: fightKey names the copy in the write-loop tracker (the
// remote key for an ordinary copy, the copy's own key for a fan-out copy, of which a remote
// object has many) and marks are the extra marks the copy carries (nil: none). The resource's
// strategy writes it (replaceCopy, applyCopy).
func (r *Reconciler) writeCopy(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, live *unstructured.Unstructured,
	fightKey types.NamespacedName, marks *copyMarks) (*unstructured.Unstructured, error) {
	var (
		out     *unstructured.Unstructured
		written bool
		err     error
	)
	if r.Resource.Strategy == fleetspec.StrategyApply {
		out, written, err = r.applyCopy(ctx, remote, localKey, live, fightKey, marks)
	} else {
		out, written, err = r.replaceCopy(ctx, remote, localKey, live, fightKey, marks)
	}
	if err != nil {
		r.fights.Failed(fight.Key{Remote: fightKey, Side: sideLocal})
		r.namespaces.Delete(localKey.Namespace) // it may be gone or terminating: read it next time
		if !apierrors.IsAlreadyExists(err) {
			r.countFailure(telemetry.DirectionDown, err)
		}
		return nil, fmt.Errorf("writing local %s: %w", localKey, err)
	}
	if !written {
		return out, nil // in sync (counted), or held back by a write fight (retried after fight.Interval)
	}
	r.count(telemetry.DirectionDown, telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).V(1).Info("spec written", "generation", out.GetGeneration())
	return out, nil
}

// copyInSync reports whether a live copy already is what the kind's strategy would write: the
// strategy's one in-sync rule (replaceCurrent, applyPlan).
func (r *Reconciler) copyInSync(remote *unstructured.Unstructured, copyKey types.NamespacedName, live *unstructured.Unstructured, marks *copyMarks) bool {
	if r.Resource.Strategy == fleetspec.StrategyApply {
		_, _, inSync := r.applyPlan(remote, copyKey, live, marks)
		return inSync
	}
	return r.replaceCurrent(remote, live, marks)
}
