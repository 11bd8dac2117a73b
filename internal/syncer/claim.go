// Rule: claim. An unclaimed remote object first gets the finalizer, with a write that cannot
// clobber other finalizers.

package syncer

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// claimPhase adds the finalizer before anything else is written for the object. The pass goes
// on with management's answer to the patch (the object as it is now, finalizer included): the
// copy is created and its generations recorded in the same pass, without waiting for the event
// the claim causes (docs/design/sync-rules.md#writes-per-new-copy).
func (r *Reconciler) claimPhase(ctx context.Context, s *scope) (bool, error) {
	if controllerutil.ContainsFinalizer(s.remote, r.Keys.Finalizer) {
		return false, nil
	}
	if err := r.claim(ctx, s.remote); err != nil {
		s.state = StatePending
		return true, err
	}
	return false, nil
}

// claim adds the finalizer with an optimistic-concurrency patch: the list it writes is the list
// it read, so it can never drop another controller's finalizer.
func (r *Reconciler) claim(ctx context.Context, remote *unstructured.Unstructured) error {
	before := remote.DeepCopy()
	controllerutil.AddFinalizer(remote, r.Keys.Finalizer)
	err := r.write(ctx, sideManagement, "claim", remote, func(ctx context.Context) error {
		return r.Remote.Patch(ctx, remote, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		r.countFailure(telemetry.DirectionClaim, err)
		return fmt.Errorf("claiming remote %s: %w", objectRef(remote), err)
	}
	r.count(telemetry.DirectionClaim, telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).V(1).Info("claimed")
	return nil
}
