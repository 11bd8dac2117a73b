// Package syncer is regionsync's sync engine (docs/design.md#sync-rules): one controller per configured kind keeps
// a region's local copies in sync with its shard of the management cluster.
//
// A reconcile is keyed by the remote object and reads both sides, then acts in a fixed order:
// claim, status up, secrets up, spec down, generations; or, when the remote object is gone or
// terminating, deletion. It returns after a claiming write so that the next pass acts on fresh
// events, writes only what changed (zero writes for an object in sync, also on resync), and guards
// every write with optimistic concurrency or a UID precondition.
package syncer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
	"github.com/regionsync/regionsync/pkg/config"
)

// FieldManager is the field manager of every write the agent makes (server-side apply included).
const FieldManager = "regionsync"

// Reconciler syncs one resource kind between the management cluster and the local cluster.
type Reconciler struct {
	// Resource is the kind's configuration; GVK its group, version and kind.
	Resource config.ResourceConfig
	GVK      schema.GroupVersionKind
	// Region is the agent's region (the value of the Region mark on local objects).
	Region string
	Keys   shard.Keys
	Mapper *shard.Mapper

	// Remote reads the management cache (the shard only) and writes to management.
	Remote client.Client
	// RemoteAPI reads management directly (secrets, which the agent may not list or watch).
	RemoteAPI client.Reader
	// Local reads the local cache (only objects the agent marked) and writes locally.
	Local client.Client
	// LocalAPI reads the local cluster directly (namespaces, unmarked objects at mapped names).
	LocalAPI client.Reader
	// Secrets reads the local Secrets named in Resource.Secrets, one cache per name.
	Secrets map[string]client.Reader
	// ManagedKinds are all kinds the agent syncs; a namespace the agent created is deleted only
	// when no other managed object of any of them is left in it.
	ManagedKinds []schema.GroupVersionKind
	// ProtectedNamespaces are local namespaces nothing is ever created, written or deleted in.
	ProtectedNamespaces sets.Set[string]

	LocalEvents  events.EventRecorder
	RemoteEvents events.EventRecorder

	// Budget holds orphan deletions beyond the deletion budget.
	Budget *budgetGate
	// SecretRecheck is how long an upload is trusted before the remote secret is read again.
	SecretRecheck time.Duration

	Log logr.Logger

	// uploaded remembers, per remote secret, the hash known to be on management and when.
	uploaded sync.Map
	// states is each shard object's state after its last reconcile.
	states *stateTracker
	// Tracer traces reconciles and writes; nil means no tracing code runs at all.
	Tracer trace.Tracer
	// eventTimes holds, per request, when its first unprocessed watch event arrived.
	eventTimes sync.Map
	// patched holds, per remote object, the last generation annotations written (generationsPatch).
	patched sync.Map
	// namespaces remembers local namespaces seen to exist, and when.
	namespaces sync.Map
	// available is closed once the kind's informers exist on both clusters.
	available chan struct{}
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

// Name is the kind's dotted name, used for the controller, metrics and logs ("Tenant.demo.regionsync.dev").
func (r *Reconciler) Name() string { return KindName(r.GVK) }

// KindName is the dotted name of a kind ("Tenant.demo.regionsync.dev", "ConfigMap" for core).
func KindName(gvk schema.GroupVersionKind) string {
	if gvk.Group == "" {
		return gvk.Kind
	}
	return gvk.Kind + "." + gvk.Group
}

func (r *Reconciler) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(r.GVK)
	return u
}

func (r *Reconciler) count(direction, result string) {
	telemetry.Syncs.WithLabelValues(r.Name(), direction, result).Inc()
	if result == telemetry.ResultWritten {
		r.states.wrote(time.Now())
	}
}

// Stats returns the kind's object counts by state and its held deletions (and keeps the
// held-deletions gauge current, also when a hold lifts by itself).
func (r *Reconciler) Stats() Stats {
	s := r.states.stats()
	if held, n := r.Budget.Held(); held {
		s.DeletionsHeld = n
	}
	telemetry.DeletionsHeld.WithLabelValues(r.Name()).Set(float64(s.DeletionsHeld))
	return s
}

// Reconcile syncs the remote object req and its local copy, and records the object's state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	defer func() { telemetry.SyncDuration.WithLabelValues(r.Name()).Observe(time.Since(start).Seconds()) }()
	state := StateSynced
	// Taken first, whatever the pass does, so that no request leaves its event time behind.
	eventAt := r.takeEventTime(req)
	result, err := r.reconcile(ctx, eventAt, req, &state)
	final := finalState(state, result, err)
	r.states.set(req.NamespacedName, final)
	if final == "" { // gone: forget what was remembered about it
		r.patched.Delete(req.NamespacedName)
		for _, name := range r.Resource.Secrets {
			r.uploaded.Delete(uploadKey{remote: req.NamespacedName, secret: name})
		}
	}
	return result, err
}

// finalState is the object's state after a pass that stopped in state with result and err.
func finalState(state string, result ctrl.Result, err error) string {
	switch {
	case state == "" || state == StatePaused || state == StateInvalid:
		return state
	case err != nil:
		return StateFailed
	case result.RequeueAfter > 0:
		return StatePending
	}
	return state
}

// reconcile runs the phases; it sets *state to "" when the object no longer belongs to the
// shard's live objects, or to the paused, invalid or pending state where it stops.
func (r *Reconciler) reconcile(ctx context.Context, eventAt time.Time, req ctrl.Request, state *string) (result ctrl.Result, err error) {
	log := r.Log.WithValues("remote", req.NamespacedName)
	ctx = logr.NewContext(ctx, log)

	localKey, mapErr := r.Mapper.ToLocal(req.NamespacedName)
	if errors.Is(mapErr, shard.ErrNotInShard) {
		*state = ""
		return ctrl.Result{}, nil
	}
	remote := r.newObject()
	if err := r.Remote.Get(ctx, req.NamespacedName, remote); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading remote %s: %w", req.NamespacedName, err)
		}
		remote = nil
	}
	reason := ReasonInvalidMapping
	if mapErr == nil && r.ProtectedNamespaces.Has(localKey.Namespace) {
		// Namespace scope: whatever the shard says, nothing is created, written or deleted in
		// the region's system namespaces, the agent's own, or the excluded ones.
		reason = ReasonProtectedNamespace
		mapErr = fmt.Errorf("%s maps to local namespace %s, which regionsync never writes (system, agent or excluded namespace)",
			req.NamespacedName, localKey.Namespace)
	}
	if mapErr != nil {
		if remote == nil { // an invalid object was deleted: nothing to report any more
			*state = ""
			return ctrl.Result{}, nil
		}
		// A bad input: report it, never retry it, and let every other object go on.
		*state = StateInvalid
		r.count(telemetry.DirectionDown, telemetry.ResultInvalid)
		log.Info("object skipped", "reason", reason, "error", mapErr.Error())
		r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, reason, "Sync", "%v", mapErr)
		return ctrl.Result{}, nil
	}
	log = log.WithValues("local", localKey)
	ctx = logr.NewContext(ctx, log)

	local := r.newObject()
	if err := r.Local.Get(ctx, localKey, local); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("reading local %s: %w", localKey, err)
		}
		local = nil
	}
	// An unmarked object at the mapped name is not a copy, whatever the cache holds (a host's
	// cache is not filtered to marked objects): the adoption rules decide in specDown, and until
	// then it is never written, deleted, or read for status and secrets.
	var unmarked *unstructured.Unstructured
	if local != nil && !r.isMarked(local) {
		unmarked, local = local, nil
	}

	ctx, end := r.beginPass(ctx, eventAt, req, remote, local, localKey)
	defer func() { end(finalState(*state, result, err)) }()

	if remote == nil {
		*state = ""
		if local != nil {
			*state = StatePending // an orphan: deleted, held or kept
		}
		return r.orphaned(ctx, req.NamespacedName, local)
	}
	if r.Keys.IsPaused(remote.GetAnnotations()) || (local != nil && r.Keys.IsPaused(local.GetAnnotations())) {
		*state = StatePaused
		r.count(telemetry.DirectionDown, telemetry.ResultPaused)
		return ctrl.Result{}, nil
	}
	if !remote.GetDeletionTimestamp().IsZero() {
		*state = StatePending
		return r.remoteDeleting(ctx, remote, local)
	}

	// 1. Claim: the finalizer first, then act on the event it causes.
	if !controllerutil.ContainsFinalizer(remote, r.Keys.Finalizer) {
		*state = StatePending
		return ctrl.Result{}, r.claim(ctx, remote)
	}
	// 2. Status up. When it fails, spec is not downloaded in this pass: management must see
	// the current state before it is changed further.
	remote, err = r.statusUp(ctx, remote, local)
	if err != nil {
		return ctrl.Result{}, err
	}
	// 3. Secrets up; a failed upload does not hold back spec.
	secretsErr := r.secretsUp(ctx, remote, local)
	// 4. Spec down.
	local, result, err = r.specDown(ctx, remote, localKey, local, unmarked)
	if err != nil || local == nil {
		*state = StatePending
		return result, errors.Join(err, secretsErr)
	}
	// 5. Generation annotations.
	if err := r.generations(ctx, remote, local); err != nil {
		return ctrl.Result{}, errors.Join(err, secretsErr)
	}
	return result, secretsErr
}

// isMarked reports whether a local object carries this agent's mark: only such objects are ever
// deleted or reverted without adoption.
func (r *Reconciler) isMarked(o client.Object) bool {
	return o.GetLabels()[r.Keys.Region] == r.Region
}

// objectRef names an object in errors.
func objectRef(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}
