package syncer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/jsonvalue"
	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/fight"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Event reasons: every write decision a person may need to see.
const (
	ReasonCreated               = "Created"
	ReasonNamespaceCreated      = "NamespaceCreated"
	ReasonAdopted               = "Adopted"
	ReasonAdoptionRefused       = "AdoptionRefused"
	ReasonInvalidMapping        = "InvalidMapping"
	ReasonProtectedNamespace    = "ProtectedNamespace"
	ReasonDeleted               = "Deleted"
	ReasonDeletionHeld          = "DeletionHeld"
	ReasonOutOfShard            = "OutOfShard"
	ReasonSecretTakeoverRefused = "SecretTakeoverRefused"
	ReasonRemoteSecretMissing   = "RemoteSecretMissing"
	ReasonStatusUploadFailed    = "StatusUploadFailed"
	ReasonStatusRefused         = "StatusRefused"
	ReasonWriteFight            = "WriteFight"
)

// waitRequeue is how soon an object is looked at again while the agent waits for something it
// does not watch (a terminating namespace or unmarked object).
const waitRequeue = 2 * time.Second

// unmarkedRecheck is how often an unmarked object that a pass left alone (adoption refused, or
// paused) is looked at again: a local cache that holds only marked copies sends no event when
// it changes.
const unmarkedRecheck = time.Minute

// errUnmarkedPaused ends a pass that found a paused unmarked object at the mapped name: it is
// neither taken over nor adopted, and nothing else is written for it.
var errUnmarkedPaused = errors.New("the local object at the mapped name is unmarked and paused")

// conflictRequeue is how soon a pass that lost an optimistic-concurrency race runs again (with a
// fresh read); refusedStatusRetry how often a status management refused is offered again when
// nothing else changes.
const (
	conflictRequeue    = 250 * time.Millisecond
	refusedStatusRetry = time.Minute
)

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
// object has many) and marks are the extra marks the copy carries (nil: none).
func (r *Reconciler) writeCopy(ctx context.Context, remote *unstructured.Unstructured, localKey types.NamespacedName, live *unstructured.Unstructured,
	fightKey types.NamespacedName, marks *copyMarks) (*unstructured.Unstructured, error) {
	var err error
	out := live
	switch r.Resource.Strategy {
	case fleetspec.StrategyApply:
		desired, hash := desiredApply(remote, localKey, r.Keys, r.Region, marks)
		if live != nil && applyInSync(desired, hash, live, r.Keys) {
			r.count(telemetry.DirectionDown, telemetry.ResultUnchanged)
			return live, nil
		}
		if live != nil && !r.admitWrite(ctx, sideLocal, fightKey, live, hash) {
			return live, nil // in a fight: the retry comes after fight.Interval
		}
		r.setTraceparent(ctx, desired)
		err = r.write(ctx, sideLocal, "apply local", desired, func(ctx context.Context) error {
			return r.Local.Apply(ctx, client.ApplyConfigurationFromUnstructured(desired), client.FieldOwner(shard.FieldManager), client.ForceOwnership)
		})
		out = desired
	default:
		if live != nil && replaceInSync(remote, live, r.Keys, r.Region) && marks.on(live) {
			r.count(telemetry.DirectionDown, telemetry.ResultUnchanged)
			return live, nil
		}
		// The same remote content written again means a local writer undid the last write.
		if live != nil && !r.admitWrite(ctx, sideLocal, fightKey, live, specHash(remote, r.Keys, r.Region)) {
			return live, nil // in a fight: the retry comes after fight.Interval
		}
		out = desiredReplace(remote, live, localKey, r.Keys, r.Region)
		marks.apply(out)
		r.setTraceparent(ctx, out)
		if live == nil {
			err = r.write(ctx, sideLocal, "create local", out, func(ctx context.Context) error {
				return r.Local.Create(ctx, out, client.FieldOwner(shard.FieldManager))
			})
		} else {
			err = r.write(ctx, sideLocal, "update local", out, func(ctx context.Context) error {
				return r.Local.Update(ctx, out, client.FieldOwner(shard.FieldManager))
			})
		}
	}
	if err != nil {
		r.fights.Failed(fight.Key{Remote: fightKey, Side: sideLocal})
		r.namespaces.Delete(localKey.Namespace) // it may be gone or terminating: read it next time
		if !apierrors.IsAlreadyExists(err) {
			r.countFailure(telemetry.DirectionDown, err)
		}
		return nil, fmt.Errorf("writing local %s: %w", localKey, err)
	}
	r.count(telemetry.DirectionDown, telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).V(1).Info("spec written", "generation", out.GetGeneration())
	return out, nil
}

// generations records, in one patch and only when they changed, which remote generation was
// copied down and the local generation that resulted; for a kind without metadata.generation
// (ConfigMap, Secret: both generations stay 0) also the hash of the content copied
// (D/sync-applied-hash), from which the hub tells whether the copy is current. The patch carries
// the remote UID, which the API server checks as a precondition.
func (r *Reconciler) generations(ctx context.Context, remote, local *unstructured.Unstructured) error {
	rg, lg := strconv.FormatInt(remote.GetGeneration(), 10), strconv.FormatInt(local.GetGeneration(), 10)
	hash := ""
	if remote.GetGeneration() == 0 {
		hash = r.Keys.AppliedContentHash(remote)
	}
	ann := remote.GetAnnotations()
	if ann[r.Keys.RemoteGeneration] == rg && ann[r.Keys.LocalGeneration] == lg && (hash == "" || ann[r.Keys.AppliedHash] == hash) {
		// The cache shows them: nothing left to remember (a memo per object would otherwise
		// stay for as long as the object does).
		r.patched.Delete(objectRef(remote))
		return nil
	}
	// The same patch was just written from this very version of the remote object: the cache
	// has not caught up yet (a local event can arrive before the remote one).
	memo := generationsPatch{from: remote.GetResourceVersion(), rg: rg, lg: lg, hash: hash}
	if v, ok := r.patched.Load(objectRef(remote)); ok && v == memo {
		return nil
	}
	annotations := map[string]string{r.Keys.RemoteGeneration: rg, r.Keys.LocalGeneration: lg}
	if hash != "" {
		annotations[r.Keys.AppliedHash] = hash
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         remote.GetUID(),
		"annotations": annotations,
	}})
	if err != nil {
		return err
	}
	err = r.write(ctx, sideManagement, "patch generations", remote, func(ctx context.Context) error {
		return r.Remote.Patch(ctx, remote.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(shard.FieldManager))
	})
	if err != nil {
		r.countFailure(telemetry.DirectionMeta, err)
		return fmt.Errorf("writing generation annotations on %s: %w", objectRef(remote), err)
	}
	r.patched.Store(objectRef(remote), memo)
	r.count(telemetry.DirectionMeta, telemetry.ResultWritten)
	return nil
}

// generationsPatch remembers the last generation annotations (and applied-content hash) written
// on a remote object and the resourceVersion they were written over.
type generationsPatch struct{ from, rg, lg, hash string }

// setTraceparent writes the reconcile's trace context on the local copy being written, so that
// the regional controller continues the same trace.
func (r *Reconciler) setTraceparent(ctx context.Context, obj *unstructured.Unstructured) {
	tp := telemetry.Traceparent(ctx)
	if tp == "" {
		return
	}
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[r.Keys.TraceParent] = tp
	obj.SetAnnotations(a)
}
