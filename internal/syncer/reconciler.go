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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	// createdEvents and namespaceEvents report routine creations in bulk (bulkEvents): the
	// copies created, in the region; the local namespaces created, on management.
	createdEvents, namespaceEvents *bulkEvents
	// deletedEvents reports the fan-out copies deleted, in bulk.
	deletedEvents *bulkEvents

	// Budget holds the deletions the remote side causes (orphans, mass termination) beyond the
	// deletion budget.
	Budget *budget.Ledger
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
	// (fanOut): a namespace event queues each of them.
	fanOutKeys memo[types.NamespacedName, struct{}]
	// fanOutPending are, per fan-out object, the namespaces whose events queued it since its last
	// pass; fanOutLast what its last full pass left (fanOutNarrowPass).
	fanOutPending pendingNamespaces
	fanOutLast    memo[types.NamespacedName, fanOutLastPass]
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
	// retries backs off, per object, the retries after expected failures (newOutageBackoff, outageRetry).
	retriesOnce sync.Once
	retries     workqueue.TypedRateLimiter[reconcile.Request]
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
	if s.recountAfter > 0 && err == nil {
		result.RequeueAfter = minRequeue(result.RequeueAfter, s.recountAfter)
	}
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
	// recountAfter is when a narrow fan-out pass's full pass is due: a requeue that is no
	// pending work (the object's state stays what the pass found).
	recountAfter time.Duration

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
// first, then claim, status up, secrets up, spec down, generations. Each rule is a file of its
// own, named as the rule, with the state it owns; the write strategies (replaceCopy, applyCopy)
// one file each too.
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

// isMarked reports whether a local object carries this agent's mark: only such objects are ever
// deleted or reverted without adoption.
func (r *Reconciler) isMarked(o client.Object) bool {
	return o.GetLabels()[r.Keys.Region] == r.Region
}

// objectRef names an object in errors.
func objectRef(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

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
