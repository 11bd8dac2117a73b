// The read phases: map the remote object to its local name, read both sides, and leave alone
// what may not be synced. Only an object that maps to a valid local name and is in the shard gets
// past them.

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// mapToLocal maps the remote name to the local one; an object outside the shard is gone.
func (r *Reconciler) mapToLocal(_ context.Context, s *scope) (bool, error) {
	s.localKey, s.mapErr = r.Mapper.ToLocal(s.req.NamespacedName)
	if errors.Is(s.mapErr, shard.ErrNotInShard) {
		s.state = stateGone
		return true, nil
	}
	return false, nil
}

// readRemote reads the remote object from the management cache; nil when it is gone.
func (r *Reconciler) readRemote(ctx context.Context, s *scope) (bool, error) {
	s.remote = r.newObject()
	var reader client.Reader = r.Remote
	if _, stale := r.stale.LoadAndDelete(s.req.NamespacedName); stale {
		reader = r.RemoteAPI // the cache lost a race: read what management has now
	}
	if err := reader.Get(ctx, s.req.NamespacedName, s.remote); err != nil {
		if !apierrors.IsNotFound(err) {
			return true, fmt.Errorf("reading remote %s: %w", s.req.NamespacedName, err)
		}
		s.remote = nil
	}
	return false, nil
}

// skipUnmappable reports an object without a valid local name (an invalid mapping, or a local
// namespace regionsync never writes) and ends the pass: a bad input is never retried, and every
// other object goes on.
func (r *Reconciler) skipUnmappable(ctx context.Context, s *scope) (bool, error) {
	reason := ReasonInvalidMapping
	if s.mapErr == nil && r.ProtectedNamespaces.Has(s.localKey.Namespace) {
		// Namespace scope: whatever the shard says, nothing is created, written or deleted in
		// the region's system namespaces, the agent's own, or the excluded ones.
		reason = ReasonProtectedNamespace
		s.mapErr = fmt.Errorf("%s maps to local namespace %s, which regionsync never writes (system, agent or excluded namespace)",
			s.req.NamespacedName, s.localKey.Namespace)
	}
	if s.mapErr == nil {
		return false, nil
	}
	if s.remote == nil { // an invalid object was deleted: nothing to report any more
		s.state = stateGone
		return true, nil
	}
	s.state = StateInvalid
	r.count(telemetry.DirectionDown, telemetry.ResultInvalid)
	logr.FromContextOrDiscard(ctx).Info("object skipped", "reason", reason, "error", s.mapErr.Error())
	r.RemoteEvents.Eventf(s.remote, nil, corev1.EventTypeWarning, reason, "Sync", "%v", s.mapErr)
	return true, nil
}

// readLocal reads the local object at the mapped name and tells a copy (marked) from an object
// that is not one (unmarked).
func (r *Reconciler) readLocal(ctx context.Context, s *scope) (bool, error) {
	local := r.newObject()
	if err := r.Local.Get(ctx, s.localKey, local); err != nil {
		if !apierrors.IsNotFound(err) {
			return true, fmt.Errorf("reading local %s: %w", s.localKey, err)
		}
		local = r.justCreated(s.localKey)
	} else {
		r.created.Delete(s.localKey)                // the cache has caught up
		r.unmarkedKeys.Delete(s.req.NamespacedName) // and shows what is at the mapped name
	}
	if local == nil {
		var err error
		if local, err = r.readListedUnmarked(ctx, s); err != nil {
			return true, err
		}
	}
	if local != nil && !r.isMarked(local) {
		s.unmarked, local = local, nil
	}
	if local != nil && r.isFanOutCopy(local) {
		s.foreign, local = local, nil
	}
	s.local = local
	return false, nil
}

// readListedUnmarked reads, from the API server, the object at the mapped name when the claim
// period's listing found an unmarked one there (listUnmarked) and the local cache does not show
// it: its pause, and whether it is a copy sync-controller left, decide what the pass may write
// (before the claim, and before a management object being deleted is released). Nil when the key
// was not listed, or the object is gone. The key stays listed until the cache shows an object at
// the mapped name (readLocal): a copy just taken over is read here until then.
func (r *Reconciler) readListedUnmarked(ctx context.Context, s *scope) (*unstructured.Unstructured, error) {
	if _, ok := r.unmarkedKeys.Load(s.req.NamespacedName); !ok {
		return nil, nil
	}
	obj := r.newObject()
	if err := r.LocalAPI.Get(ctx, s.localKey, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.unmarkedKeys.Delete(s.req.NamespacedName)
			return nil, nil
		}
		return nil, fmt.Errorf("reading local %s: %w", s.localKey, err)
	}
	return obj, nil // unmarked; or marked (just taken over) before the cache shows it
}

// unmarkedPage is the page size of listUnmarked.
const unmarkedPage = 500

// listUnmarked lists from the API server, by metadata only, the kind's local objects that carry
// no region's mark at a mapped name of the shard outside the protected namespaces (above all the
// copies sync-controller left, which a local cache holding only marked copies never shows),
// remembers them for readListedUnmarked, and returns their remote keys: the claim period's full
// pass looks at each, also where the remote object is gone (a copy to delete).
func (r *Reconciler) listUnmarked(ctx context.Context) ([]types.NamespacedName, error) {
	if r.secretKind() {
		return nil, nil // the region's Secrets that are not fan-out copies are never looked at
	}
	noMark, err := labels.NewRequirement(r.Keys.Region, selection.DoesNotExist, nil)
	if err != nil {
		return nil, err
	}
	r.unmarkedKeys.Clear()
	var keys []types.NamespacedName
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(shard.ListGVK(r.GVK))
	for {
		opts := []client.ListOption{client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*noMark)}, client.Limit(unmarkedPage)}
		if list.Continue != "" {
			opts = append(opts, client.Continue(list.Continue))
		}
		if err := r.LocalAPI.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		for i := range list.Items {
			local := objectRef(&list.Items[i])
			remote, err := r.Mapper.ToRemote(local)
			if err != nil || r.ProtectedNamespaces.Has(local.Namespace) {
				continue
			}
			r.unmarkedKeys.Store(remote, struct{}{})
			keys = append(keys, remote)
		}
		if list.Continue == "" {
			return keys, nil
		}
	}
}

// createdMemo is how long a copy this replica created stands in for the local cache's answer
// "not found": the cache shows a create within milliseconds, so the memo only covers the pass
// that runs right after the creating one (the claim's and the generations' own events).
const createdMemo = 5 * time.Second

type createdCopy struct {
	obj *unstructured.Unstructured
	at  time.Time
}

// rememberCreated records a copy this replica just created (the API server's answer).
func (r *Reconciler) rememberCreated(key types.NamespacedName, obj *unstructured.Unstructured) {
	r.created.Store(key, createdCopy{obj: obj.DeepCopy(), at: time.Now()})
}

// justCreated returns a copy of the object this replica created at key less than createdMemo
// ago, or nil: a pass that reads before the local cache shows the create does not create it
// again (a wasted request answered AlreadyExists).
func (r *Reconciler) justCreated(key types.NamespacedName) *unstructured.Unstructured {
	c, ok := r.created.Load(key)
	if !ok {
		return nil
	}
	if time.Since(c.at) > createdMemo {
		r.created.Delete(key)
		return nil
	}
	return c.obj.DeepCopy()
}
