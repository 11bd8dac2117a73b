package syncer

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Secrets fan out and only fan out (docs/design/fan-out.md#secrets-fan-out-only): the configuration
// accepts the Secret kind only with fanOut.enabled and allowPrivileged. A management Secret is
// never copied as an ordinary copy (one that does not ask for fan-out is refused with an event,
// and nothing is written or deleted for it), a Secret the agent uploads from the region is never
// a fan-out source (whatever its annotations), and in the region the agent writes and deletes only
// its own fan-out copies: no unmarked Secret is listed, adopted or taken over.

// ReasonSecretNotFannedOut is the Warning event reason of a management Secret of the shard that
// does not ask for fan-out, or is one the agent uploads: it is not copied into the region.
const ReasonSecretNotFannedOut = "SecretNotFannedOut"

// secretKind reports whether the reconciler's kind is the core Secret.
func (r *Reconciler) secretKind() bool {
	return fleetspec.IsSecret(r.GVK.Group, r.GVK.Kind)
}

// UploadedSecretNames are the management names of the Secrets the agent uploads: every
// configured resource's secrets, mapped as they are uploaded (shard.Mapper.RemoteSecretName).
func UploadedSecretNames(resources []fleetspec.Resource, remoteName func(string) string) sets.Set[string] {
	out := sets.New[string]()
	for _, res := range resources {
		for _, name := range res.Secrets {
			out.Insert(remoteName(name))
		}
	}
	return out
}

// isUploadedSecret reports whether a management Secret is one the agent uploads (or uploaded): it
// carries the upload hash annotation, or it has the name of an upload target. Such a Secret holds
// what the region sent up (a tenant's token) and is never copied back down.
func (r *Reconciler) isUploadedSecret(o client.Object) bool {
	if !r.secretKind() {
		return false
	}
	if _, ok := o.GetAnnotations()[r.Keys.LastUploadedHash]; ok {
		return true
	}
	return r.UploadedSecrets.Has(o.GetName())
}

// fanOutSpec returns the fan-out annotation of a management object and whether it asks for
// fan-out; a Secret the agent uploads never does, whatever its annotations.
func (r *Reconciler) fanOutSpec(remote *unstructured.Unstructured) (string, bool) {
	if remote == nil || r.isUploadedSecret(remote) {
		return "", false
	}
	spec, ok := remote.GetAnnotations()[r.Keys.FanOutNamespaces]
	return spec, ok
}

// refuseOrdinarySecret ends the pass of a management Secret that is not (or no longer) a fan-out
// source and has no fan-out copies left: nothing is written or deleted for it in the region. A
// Secret the agent uploads is passed over silently unless it asks for fan-out; any other one is
// refused with a Warning event on it. The agent's finalizer, left from the time it fanned out, is
// released (it has no copies to hold it for). Names only: no data is ever logged or reported.
func (r *Reconciler) refuseOrdinarySecret(ctx context.Context, s *scope) error {
	if s.remote == nil {
		s.state = stateGone
		return nil
	}
	if controllerutil.ContainsFinalizer(s.remote, r.Keys.Finalizer) {
		if err := r.releaseFinalizer(ctx, s.remote, false); err != nil {
			s.state = StatePending
			return err
		}
	}
	_, asked := s.remote.GetAnnotations()[r.Keys.FanOutNamespaces]
	uploaded := r.isUploadedSecret(s.remote)
	if uploaded && !asked {
		s.state = stateGone // the region's own upload: not a shard object of this kind
		return nil
	}
	msg := fmt.Sprintf("Secret %s does not ask for namespace fan-out (annotation %s); a Secret is never copied as an ordinary copy, nothing is written",
		s.req.NamespacedName, r.Keys.FanOutNamespaces)
	if uploaded {
		msg = fmt.Sprintf("Secret %s is uploaded by region %s's agent (resources[].secrets); it is never fanned out, nothing is written",
			s.req.NamespacedName, r.Region)
	}
	s.state = StateInvalid
	r.count(telemetry.DirectionDown, telemetry.ResultInvalid)
	logr.FromContextOrDiscard(ctx).Info("Secret not synced", "reason", ReasonSecretNotFannedOut, "error", msg)
	r.RemoteEvents.Eventf(s.remote, nil, corev1.EventTypeWarning, ReasonSecretNotFannedOut, "Sync", "%s", msg)
	return nil
}
