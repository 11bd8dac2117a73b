// Rule: secrets up. The local Secrets a resource names, controlled by the copy, are uploaded to
// management with the remote object as their controller; unchanged ones cost no write.

package syncer

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// secretsUpPhase uploads secrets; a failed upload does not hold back spec.
func (r *Reconciler) secretsUpPhase(ctx context.Context, s *scope) (bool, error) {
	if r.copyOfAnother(ctx, s) {
		return false, nil
	}
	s.secretsErr = r.secretsUp(ctx, s.remote, s.local)
	return false, nil
}

// copyOfAnother reports whether the copy records another remote object's UID than this one's (the
// object was deleted and created again, or management was rebuilt): its status and secrets belong
// to that other object, so they are uploaded only once spec has been synced from this one (which
// records its UID; the pass's own spec write triggers the next).
func (r *Reconciler) copyOfAnother(ctx context.Context, s *scope) bool {
	if s.local == nil {
		return false
	}
	uid, ok := s.local.GetAnnotations()[r.Keys.RemoteUID]
	if !ok || uid == string(s.remote.GetUID()) {
		return false
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("the copy belongs to another remote object; status and secrets wait for this one's spec",
		"recordedUID", uid, "remoteUID", s.remote.GetUID())
	return true
}

type uploadedSecret struct {
	hash  string
	owner types.UID
	at    time.Time
}

// uploadKey names one uploaded secret of one remote object.
type uploadKey struct {
	remote types.NamespacedName
	secret string
}

// secretsUp uploads each configured local Secret controlled by the local object to the remote
// Secret "<name><suffix>", which must exist. A remote secret controlled by another owner is never
// taken over, and an unchanged secret causes no write. No secret data is ever logged.
func (r *Reconciler) secretsUp(ctx context.Context, remote, local *unstructured.Unstructured) error {
	if local == nil {
		return nil
	}
	var errs []error
	for _, name := range r.Resource.Secrets {
		if err := r.uploadSecret(ctx, remote, local, name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// Joined, not flattened to text: a conflict among them stays a conflict (errors.As).
		return fmt.Errorf("uploading secrets of %s: %w", objectRef(remote), errors.Join(errs...))
	}
	return nil
}

func (r *Reconciler) uploadSecret(ctx context.Context, remote, local *unstructured.Unstructured, name string) error {
	secret := &corev1.Secret{}
	if err := r.Secrets[name].Get(ctx, types.NamespacedName{Namespace: local.GetNamespace(), Name: name}, secret); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(secret, local) {
		return nil // not this object's secret
	}
	hash := hashSecretData(string(secret.Type), secret.Data)
	remoteKey := types.NamespacedName{Namespace: remote.GetNamespace(), Name: r.Mapper.RemoteSecretName(name)}
	memoKey := uploadKey{remote: objectRef(remote), secret: name}
	if u, ok := r.uploaded.Load(memoKey); ok {
		if u.hash == hash && u.owner == remote.GetUID() && time.Since(u.at) < r.SecretRecheck {
			r.countSecret(telemetry.ResultUnchanged)
			return nil
		}
	}
	target := &corev1.Secret{}
	if err := r.RemoteAPI.Get(ctx, remoteKey, target); err != nil {
		r.countSecret(telemetry.ResultError)
		if apierrors.IsNotFound(err) {
			r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonRemoteSecretMissing, "UploadSecret",
				"remote secret %s must exist before %s can be uploaded", remoteKey, name)
		}
		return fmt.Errorf("reading remote secret %s: %w", remoteKey, err)
	}
	if owner := metav1.GetControllerOf(target); owner != nil && owner.UID != remote.GetUID() {
		r.countSecret(telemetry.ResultRefused)
		r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonSecretTakeoverRefused, "UploadSecret",
			"remote secret %s is controlled by %s %s; not taken over", remoteKey, owner.Kind, owner.Name)
		return nil
	}
	if metav1.IsControlledBy(target, remote) && target.Annotations[r.Keys.LastUploadedHash] == hash &&
		hashSecretData(string(target.Type), target.Data) == hash {
		r.uploaded.Store(memoKey, uploadedSecret{hash: hash, owner: remote.GetUID(), at: time.Now()})
		r.countSecret(telemetry.ResultUnchanged)
		return nil
	}
	if target.Type != "" && secret.Type != "" && target.Type != secret.Type {
		r.countSecret(telemetry.ResultError)
		return fmt.Errorf("remote secret %s has type %s, local %s/%s has %s (type is immutable)",
			remoteKey, target.Type, secret.Namespace, name, secret.Type)
	}
	target.Data = secret.Data
	target.StringData = nil
	if target.Annotations == nil {
		target.Annotations = map[string]string{}
	}
	target.Annotations[r.Keys.LastUploadedHash] = hash
	if !metav1.IsControlledBy(target, remote) {
		target.OwnerReferences = append(target.OwnerReferences, metav1.OwnerReference{
			APIVersion: remote.GetAPIVersion(), Kind: remote.GetKind(), Name: remote.GetName(), UID: remote.GetUID(),
			Controller: ptr.To(true),
		})
	}
	err := r.write(ctx, sideManagement, "upload secret", target, func(ctx context.Context) error {
		return r.Remote.Update(ctx, target, client.FieldOwner(shard.FieldManager))
	})
	if err != nil {
		r.countSecret(telemetry.ResultError)
		return fmt.Errorf("updating remote secret %s: %w", remoteKey, err)
	}
	r.uploaded.Store(memoKey, uploadedSecret{hash: hash, owner: remote.GetUID(), at: time.Now()})
	r.countSecret(telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).V(1).Info("secret uploaded", "secret", remoteKey)
	return nil
}

func (r *Reconciler) countSecret(result string) {
	telemetry.SecretUploads.WithLabelValues(r.Name(), result).Inc()
}
