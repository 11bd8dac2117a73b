// Rule: status up. The remote status mirrors the local one; a transient failure holds spec back
// in that pass, a refusal does not.

package syncer

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/fight"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// statusUpPhase uploads status. When it fails transiently, spec is not downloaded in this pass:
// management must see the current state before it is changed further. When management refuses
// the status, the refusal is reported and spec keeps flowing: a region must never be frozen out
// of fixes by a status it cannot upload.
func (r *Reconciler) statusUpPhase(ctx context.Context, s *scope) (done bool, err error) {
	if r.copyOfAnother(ctx, s) {
		return false, nil
	}
	s.remote, s.statusRefused, err = r.statusUp(ctx, s.remote, s.local)
	return false, err
}

// statusUp mirrors the local status to the remote status subresource. It returns the remote
// object as it is after the write, and refused when management refused the status for good
// (see statusRefusal): the refusal is reported and spec keeps flowing. Any other error is
// transient, and holds spec back in this pass.
func (r *Reconciler) statusUp(ctx context.Context, remote, local *unstructured.Unstructured) (_ *unstructured.Unstructured, refused, _ error) {
	if local == nil {
		return remote, nil, nil
	}
	status, ok := local.Object["status"]
	if !ok || reflect.DeepEqual(remote.Object["status"], status) {
		return remote, nil, nil
	}
	if !r.admitWrite(ctx, sideManagement, objectRef(remote), remote, jsonvalue.Hash(status)) {
		return remote, nil, nil // in a fight: the retry comes after fight.Interval
	}
	updated := remote.DeepCopy()
	updated.Object["status"] = jsonvalue.DeepCopy(status)
	err := r.write(ctx, sideManagement, "upload status", remote, func(ctx context.Context) error {
		return r.Remote.Status().Update(ctx, updated, client.FieldOwner(shard.FieldManager))
	})
	if err != nil {
		r.fights.Failed(fight.Key{Remote: objectRef(remote), Side: sideManagement})
	}
	switch {
	case err == nil:
		r.count(telemetry.DirectionUp, telemetry.ResultWritten)
		return updated, nil, nil
	case apierrors.IsConflict(err):
		return nil, nil, fmt.Errorf("uploading status of %s: %w", objectRef(remote), err) // retried quietly
	case statusRefusal(err):
		r.count(telemetry.DirectionUp, telemetry.ResultRefused)
		r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonStatusRefused, "Sync",
			"management refused the status from region %s; spec keeps flowing: %v", r.Region, err)
		return remote, fmt.Errorf("management refused the status of %s: %w", objectRef(remote), err), nil
	}
	r.count(telemetry.DirectionUp, telemetry.ResultError)
	if !retry.Transient(err) {
		// An outage's failures are the outage: an Event about it could not reach management
		// anyway, and the connection's condition and metric already say it.
		r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonStatusUploadFailed, "Sync", "status upload failed, spec download held: %v", err)
	}
	return nil, nil, fmt.Errorf("uploading status of %s: %w", objectRef(remote), err)
}

// statusRefusal reports whether a failed status upload is a refusal that retrying cannot cure:
// the object or its status subresource does not exist (NotFound, MethodNotSupported), the agent
// may not write it (Forbidden, which admission policies and webhooks also answer), or the status
// is not acceptable (Invalid, BadRequest). Conflicts, timeouts, throttling and server errors are
// transient.
func statusRefusal(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) || apierrors.IsForbidden(err) ||
		apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}
