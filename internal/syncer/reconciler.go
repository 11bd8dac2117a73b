// Package syncer is regionsync's sync engine (docs/design/sync-rules.md#sync-rules): one controller per configured kind keeps
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
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/budget"
	"github.com/regionsync/regionsync/internal/syncer/fight"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Reconciler syncs one resource kind between the management cluster and the local cluster.
type Reconciler struct {
	// Resource is the kind's configuration; GVK its group, version and kind.
	Resource fleetspec.Resource
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
	// KindAvailable reports whether a managed kind's caches have synced; the others are read
	// from the API server, each read bounded in time. Nil: only this kind's.
	KindAvailable func(schema.GroupVersionKind) bool
	// ProtectedNamespaces are local namespaces nothing is ever created, written or deleted in.
	ProtectedNamespaces sets.Set[string]
	// Namespaces reads the region's namespaces (metadata, every namespace) for namespace
	// fan-out; nil when no configured kind fans out.
	Namespaces client.Reader
	// SameCluster reports whether management is the local cluster itself (nil: never).
	SameCluster func(context.Context) bool
	// UploadedSecrets are the management names of the Secrets the agent uploads
	// (UploadedSecretNames): for the Secret kind, never a fan-out source.
	UploadedSecrets sets.Set[string]

	LocalEvents  events.EventRecorder
	RemoteEvents events.EventRecorder
	// createdEvents and namespaceEvents report routine creations in bulk (bulkevents.go): the
	// copies created, in the region; the local namespaces created, on management.
	createdEvents, namespaceEvents *bulkEvents
	// deletedEvents reports the fan-out copies deleted, in bulk.
	deletedEvents *bulkEvents

	// Budget holds the deletions the remote side causes (orphans, mass termination) beyond the
	// deletion budget.
	Budget *budget.Gate
	// SecretRecheck is how long an upload is trusted before the remote secret is read again.
	SecretRecheck time.Duration

	Log logr.Logger

	// uploaded remembers, per remote secret, the hash known to be on management and when.
	uploaded memo[uploadKey, uploadedSecret]
	// states is each shard object's state after its last reconcile.
	states *stateTracker
	// Tracer traces reconciles and writes; nil means no tracing code runs at all.
	Tracer trace.Tracer
	// eventTimes holds, per request, when its first unprocessed watch event arrived.
	eventTimes memo[types.NamespacedName, time.Time]
	// patched holds, per remote object, the last generation annotations written (generationsPatch).
	patched memo[types.NamespacedName, generationsPatch]
	// fights detects write loops with other writers, per object and side.
	fights *fight.Tracker
	// stale holds the requests whose last pass hit a conflict: their next pass reads the remote
	// object from the API server.
	stale memo[types.NamespacedName, bool]
	// namespaces remembers local namespaces seen to exist, and when.
	namespaces memo[string, time.Time]
	// created holds copies this replica created that the local cache has not shown yet (see
	// readLocal), by local key.
	created memo[types.NamespacedName, createdCopy]
	// unmarkedKeys are the remote keys at whose mapped name the claim period's listing found an
	// object without any region's mark (listUnmarked): sync-controller's copies above all, which
	// a local cache holding only marked copies never shows. A pass reads that object directly.
	unmarkedKeys memo[types.NamespacedName, struct{}]
	// fanOutKeys are the remote keys known to have fan-out copies, or to ask for them
	// (fanout.go): a namespace event queues each of them.
	fanOutKeys memo[types.NamespacedName, struct{}]
	// reports holds, per fan-out object, the last report written and when.
	reports memo[types.NamespacedName, reportWrite]
	// refused holds, per fan-out copy's key, when an object that is not the copy was found
	// there and left alone.
	refused memo[types.NamespacedName, time.Time]
	// fanOutCounts are the fan-out objects' last counts (regionsync_fanout_namespaces).
	fanOutCounts fanOutCounts
	// available is closed once the kind's informers exist on both clusters.
	available chan struct{}
	// firstPass is set once every shard object in the management cache has been reconciled;
	// firstPassAt is when that was last checked.
	firstPass   atomic.Bool
	firstPassMu sync.Mutex
	firstPassAt time.Time
	// retries backs off, per object, the retries after expected failures (outage.go).
	retriesOnce sync.Once
	retries     workqueue.TypedRateLimiter[reconcile.Request]
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
func (r *Reconciler) Name() string { return shard.KindName(r.GVK) }

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

// firstPassRecheck is how often an unfinished first pass is checked.
const firstPassRecheck = 2 * time.Second

// firstPassDone reports whether the kind's first pass over the shard finished: its informers
// exist and every shard object the management cache holds has a state.
func (r *Reconciler) firstPassDone(ctx context.Context, remote cache.Cache) bool {
	if r.firstPass.Load() {
		return true
	}
	select {
	case <-r.available:
	default:
		return false
	}
	r.firstPassMu.Lock()
	defer r.firstPassMu.Unlock()
	if time.Since(r.firstPassAt) < firstPassRecheck {
		return false
	}
	r.firstPassAt = time.Now()
	keys, err := cachedKeys(ctx, remote, r.GVK)
	if err != nil {
		r.Log.Error(err, "checking the first pass")
		return false
	}
	for _, key := range keys {
		if _, err := r.Mapper.ToLocal(key); errors.Is(err, shard.ErrNotInShard) {
			continue
		}
		if !r.states.knows(key) {
			return false
		}
	}
	r.firstPass.Store(true)
	return true
}

// admitWrite decides whether a write of content hash to the object's side may go now (see
// fight.Tracker): a write that another writer keeps undoing is held back, counted and reported.
func (r *Reconciler) admitWrite(ctx context.Context, side string, remoteKey types.NamespacedName, obj client.Object, hash string) bool {
	v := r.fights.Admit(fight.Key{Remote: remoteKey, Side: side}, hash, time.Now())
	if !v.Allowed {
		telemetry.WriteFights.WithLabelValues(r.Name(), side).Inc()
	}
	if v.Report {
		what, other := "the status it uploads to management", "a writer on management"
		if side == sideLocal {
			what, other = "the spec of the local copy", "a writer in region "+r.Region
		}
		msg := fmt.Sprintf("%s keeps undoing %s (%d undone writes in a row): regionsync (region %s) now writes it at most once per %s until the other writer stops",
			other, what, v.Undone, r.Region, fight.Interval)
		logr.FromContextOrDiscard(ctx).Info("write loop with another writer; backing off", "cluster", side, "undone", v.Undone)
		if side == sideLocal {
			r.LocalEvents.Eventf(obj, nil, corev1.EventTypeWarning, ReasonWriteFight, "Sync", "%s", msg)
		} else {
			r.RemoteEvents.Eventf(obj, nil, corev1.EventTypeWarning, ReasonWriteFight, "Sync", "%s", msg)
		}
	}
	return v.Allowed
}

// countFailure counts a failed write, unless it was a routine optimistic-concurrency conflict
// (retried at once with a fresh read: nothing failed).
func (r *Reconciler) countFailure(direction string, err error) {
	if !apierrors.IsConflict(err) {
		r.count(direction, telemetry.ResultError)
	}
}

// Stats returns the kind's object counts by state and its held deletions (and keeps the
// held-deletions gauge current, also when a hold lifts by itself).
func (r *Reconciler) Stats() Stats {
	s := r.states.stats()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.DeletionsHeld = r.Budget.Held(ctx)
	s.FanOutMatching, s.FanOutCurrent, s.FanOutFailed = r.FanOutCopies()
	telemetry.DeletionsHeld.WithLabelValues(r.Name()).Set(float64(s.DeletionsHeld))
	return s
}

// Reconcile syncs the remote object req and its local copy, and records the object's state.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	start := time.Now()
	defer func() { telemetry.SyncDuration.WithLabelValues(r.Name()).Observe(time.Since(start).Seconds()) }()
	s := &scope{req: req, state: StateSynced}
	// Taken first, whatever the pass does, so that no request leaves its event time behind.
	eventAt := r.takeEventTime(req)
	result, err := r.reconcile(ctx, eventAt, s)
	if apierrors.IsConflict(err) {
		// Routine optimistic concurrency: this replica's view is stale. Read afresh from the
		// API servers, not the caches, and try again soon; nothing failed.
		r.stale.Store(req.NamespacedName, true)
		logr.FromContextOrDiscard(ctx).V(1).Info("conflict; retrying with a fresh read", "remote", req.NamespacedName, "error", err.Error())
		result, err = reconcile.Result{RequeueAfter: conflictRequeue}, nil
	}
	outage := expectedFailure(err)
	if outage {
		// An outage (or a busy API server), not a bug: reported once by the management
		// connection's transitions; per object it is a debug line and a retry with backoff.
		logr.FromContextOrDiscard(ctx).V(1).Info("retrying after an expected failure", "remote", req.NamespacedName, "error", err.Error())
		result, err = reconcile.Result{RequeueAfter: r.outageRetry(req)}, nil
	} else {
		r.outageOver(req)
	}
	if wait := r.fights.RetryAfter(req.NamespacedName, time.Now()); wait > 0 && err == nil && result.IsZero() {
		result = reconcile.Result{RequeueAfter: wait} // a write held back by a fight goes then
	}
	if s.fanOutFailed && err == nil {
		s.state = StateFailed // some matching namespace has no current copy
	}
	if err == nil && s.statusRefused != nil && result.IsZero() {
		// Spec flowed; the status did not. Failed until management accepts it (a local status
		// change tries again at once, and so does this retry).
		s.state = StateFailed
		result = reconcile.Result{RequeueAfter: refusedStatusRetry}
	}
	final := finalState(s.state, result, err)
	if outage && final == StatePending {
		final = StateFailed
	}
	if (s.statusRefused != nil || s.fanOutFailed) && final == StatePending && err == nil {
		final = StateFailed
	}
	r.states.set(req.NamespacedName, final)
	if final == stateGone { // forget what was remembered about it
		r.patched.Delete(req.NamespacedName)
		r.fights.Forget(req.NamespacedName)
		for _, name := range r.Resource.Secrets {
			r.uploaded.Delete(uploadKey{remote: req.NamespacedName, secret: name})
		}
		if s.localKey.Name != "" {
			r.created.Delete(s.localKey)
		}
		r.unmarkedKeys.Delete(req.NamespacedName)
		if s.fanOut {
			r.forgetFanOut(req.NamespacedName)
		}
	}
	return result, err
}

// finalState is the object's state after a pass that stopped in state with result and err.
func finalState(state ObjectState, result reconcile.Result, err error) ObjectState {
	switch {
	case state == stateGone || state == StatePaused || state == StateInvalid:
		return state
	case err != nil:
		return StateFailed
	case result.RequeueAfter > 0:
		return StatePending
	}
	return state
}

// scope is what one reconcile knows about a remote object and its local copy. The phases read
// and update it in order; each sets state when the pass stops there in a state other than synced.
type scope struct {
	req reconcile.Request
	// localKey is where the copy lives; mapErr why the object has no valid local name.
	localKey types.NamespacedName
	mapErr   error
	// remote is the management object, nil when it is gone.
	remote *unstructured.Unstructured
	// local is the marked copy, nil when there is none. unmarked is an object at the mapped name
	// that carries no mark: never a copy (a host's cache is not filtered to marked objects), it
	// goes to the adoption rules in specDown and until then is never written, deleted, or read
	// for status and secrets.
	local, unmarked *unstructured.Unstructured
	// foreign is a fan-out copy of another management object at the mapped name: never this
	// object's copy, never written or deleted by this pass.
	foreign *unstructured.Unstructured
	// fanOut is set when the pass is a fan-out pass (routeFanOut); fanOutFailed when a matching
	// namespace's copy failed.
	fanOut, fanOutFailed bool

	state  ObjectState
	result reconcile.Result
	// secretsErr is a failed secret upload: it does not hold back the phases after it, and is
	// returned with whatever they return.
	secretsErr error
	// statusRefused is management's refusal of the status: it holds nothing back, and the object
	// counts as failed until the status is accepted.
	statusRefused error
}

// A phase is one step of a reconcile. It returns done when the pass ends with it (an error ends
// it too); the pass's result is s.result.
type phase func(r *Reconciler, ctx context.Context, s *scope) (done bool, err error)

// readPhases read both sides. Only an object that maps to a valid local name and is in the shard
// gets past them.
var readPhases = []phase{
	(*Reconciler).mapToLocal,
	(*Reconciler).readRemote,
	(*Reconciler).routeFanOut,
	(*Reconciler).skipUnmappable,
	(*Reconciler).readLocal,
}

// syncPhases act on what was read, in the order that keeps both sides safe: deletion paths
// first, then claim, status up, secrets up, spec down, generations.
var syncPhases = []phase{
	(*Reconciler).deleteOrphan,
	(*Reconciler).skipPaused,
	(*Reconciler).followRemoteDeletion,
	(*Reconciler).claimPhase,
	(*Reconciler).statusUpPhase,
	(*Reconciler).secretsUpPhase,
	(*Reconciler).specDownPhase,
	(*Reconciler).generationsPhase,
}

// reconcile runs the read phases, then records the pass (and traces it) and runs the sync phases.
func (r *Reconciler) reconcile(ctx context.Context, eventAt time.Time, s *scope) (result reconcile.Result, err error) {
	log := r.Log.WithValues("remote", s.req.NamespacedName)
	ctx = logr.NewContext(ctx, log)
	if done, err := r.run(ctx, s, readPhases); done && !s.fanOut || err != nil {
		return s.result, err
	}
	phases := syncPhases
	if s.fanOut {
		phases = fanOutPhases
	}
	ctx = logr.NewContext(ctx, log.WithValues("local", s.localKey))
	ctx, end := r.beginPass(ctx, eventAt, s.req, s.remote, s.local, s.localKey)
	start := time.Now()
	defer func() {
		state := finalState(s.state, result, err)
		end(state)
		if log := logr.FromContextOrDiscard(ctx).V(2); log.Enabled() {
			kv := []any{"state", string(state), "actions", actionsOf(ctx), "took", time.Since(start).String()}
			if result.RequeueAfter > 0 {
				kv = append(kv, "requeueAfter", result.RequeueAfter.String())
			}
			if err != nil {
				kv = append(kv, "error", err.Error())
			}
			if s.statusRefused != nil {
				kv = append(kv, "statusRefused", s.statusRefused.Error())
			}
			log.Info("pass", kv...)
		}
	}()
	_, err = r.run(ctx, s, phases)
	return s.result, err
}

// run runs phases in order until one is done or fails; a failed secret upload is returned with
// what comes after it.
func (r *Reconciler) run(ctx context.Context, s *scope, phases []phase) (done bool, err error) {
	for _, p := range phases {
		if done, err = p(r, ctx, s); done || err != nil {
			break
		}
	}
	if s.secretsErr != nil {
		err = errors.Join(err, s.secretsErr)
	}
	return done, err
}

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

// skipPaused ends the pass for an object paused on either side: on management, on its copy, or
// on the unmarked object at the mapped name (a copy sync-controller left is never taken over
// while paused; the pass looks at it again every unmarkedRecheck, as a local cache holding only
// marked copies sends no event when its pause is removed).
func (r *Reconciler) skipPaused(_ context.Context, s *scope) (bool, error) {
	unmarkedPaused := s.unmarked != nil && r.Keys.IsPaused(s.unmarked.GetAnnotations())
	if !r.Keys.IsPaused(s.remote.GetAnnotations()) && (s.local == nil || !r.Keys.IsPaused(s.local.GetAnnotations())) && !unmarkedPaused {
		return false, nil
	}
	s.state = StatePaused
	r.count(telemetry.DirectionDown, telemetry.ResultPaused)
	if unmarkedPaused {
		s.result = reconcile.Result{RequeueAfter: unmarkedRecheck}
	}
	return true, nil
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

// generationsPhase writes the generation annotations.
func (r *Reconciler) generationsPhase(ctx context.Context, s *scope) (bool, error) {
	if err := r.generations(ctx, s.remote, s.local); err != nil {
		s.result = reconcile.Result{}
		return true, err
	}
	return false, nil
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
