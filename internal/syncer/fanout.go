package syncer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/syncer/budget"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Namespace fan-out (docs/design/fan-out.md#namespace-fan-out): a management object annotated
// D/fan-out-namespaces has no ordinary mapped copy; the agent keeps one copy of it in every
// local namespace the annotation's selector matches, inside the shard's namespace scope, and
// removes the copy from a namespace that stops matching. Copies carry the region's mark, the
// remote UID and the source's identity (a label hashing its key, an annotation naming it); only
// such copies are ever written or deleted, and an object of the same name that is not one is
// never adopted.

// Event reasons of namespace fan-out.
const (
	// ReasonInvalidFanOut: the fan-out annotation cannot be used (empty or not a selector, or
	// the kind does not fan out); nothing is created or deleted.
	ReasonInvalidFanOut = "InvalidFanOut"
	// ReasonFanOutCollision: an ordinary copy's mapped name is taken by a fan-out copy of
	// another management object.
	ReasonFanOutCollision = "FanOutCollision"
)

// Timing of fan-out.
const (
	// FanOutReportInterval is the least time between two writes of a fan-out report (a change
	// within it is written when it ends).
	FanOutReportInterval = 30 * time.Second
	// maxFanOutWrites bounds the copies one pass creates or updates: a pass over thousands of
	// namespaces ends well within reconcileTimeout and the next one goes on at once.
	maxFanOutWrites = 250
	// maxReportedFailures bounds the failed namespaces a report names (the rest are counted).
	maxReportedFailures = 20
)

// fanOutUnitPrefix starts the name of a budget unit that is one fan-out copy: no object name
// contains ':', so a unit never collides with a remote key.
const fanOutUnitPrefix = "fan-out:"

// fanOutUnit is the deletion budget's unit of a fan-out copy removed because its namespace
// stopped matching (one per namespace; a source terminating or vanishing is one unit, its key).
func fanOutUnit(copyKey types.NamespacedName) types.NamespacedName {
	return types.NamespacedName{Namespace: copyKey.Namespace, Name: fanOutUnitPrefix + copyKey.Name}
}

// fanOutSourceHash is the value of the source label on a remote object's fan-out copies.
func fanOutSourceHash(key types.NamespacedName) string {
	h := sha256.Sum256([]byte(key.String()))
	return hex.EncodeToString(h[:20])
}

// fanOutMarks are the marks of remote key's fan-out copies (beyond the region's and the UID).
func (r *Reconciler) fanOutMarks(key types.NamespacedName) *copyMarks {
	return &copyMarks{
		labels:      map[string]string{r.Keys.FanOutSource: fanOutSourceHash(key)},
		annotations: map[string]string{r.Keys.FanOutSourceKey: key.String()},
	}
}

// fanOutSourceOf returns the remote key a local object is a fan-out copy of: it carries the
// region's mark, the source label and the source annotation, and they agree.
func (r *Reconciler) fanOutSourceOf(o client.Object) (types.NamespacedName, bool) {
	if !r.isMarked(o) {
		return types.NamespacedName{}, false
	}
	return fanOutSourceKey(r.Keys, o)
}

// fanOutSourceKey returns the source key a fan-out copy names (any region's mark).
func fanOutSourceKey(keys shard.Keys, o client.Object) (types.NamespacedName, bool) {
	hash, ok := o.GetLabels()[keys.FanOutSource]
	if !ok {
		return types.NamespacedName{}, false
	}
	ns, name, found := cutKey(o.GetAnnotations()[keys.FanOutSourceKey])
	key := types.NamespacedName{Namespace: ns, Name: name}
	if !found || fanOutSourceHash(key) != hash {
		return types.NamespacedName{}, false
	}
	return key, true
}

func cutKey(s string) (ns, name string, ok bool) {
	for i := range len(s) {
		if s[i] == '/' {
			return s[:i], s[i+1:], i > 0 && i < len(s)-1
		}
	}
	return "", "", false
}

// isFanOutCopy reports whether a local object is a fan-out copy (of any source): never an
// ordinary copy, whatever remote object maps to its name.
func (r *Reconciler) isFanOutCopy(o client.Object) bool {
	_, ok := o.GetLabels()[r.Keys.FanOutSource]
	return ok
}

// routeFanOut ends the read phases of a fan-out pass (its sync phases are fanOutPhases): the
// remote object asks for fan-out, or fan-out copies of it are known. A management object that
// is itself a fan-out copy (management and the region are one cluster) is never a source.
func (r *Reconciler) routeFanOut(ctx context.Context, s *scope) (bool, error) {
	if s.remote != nil && r.isFanOutCopy(s.remote) {
		s.state = stateGone
		return true, nil
	}
	_, asked := r.fanOutSpec(s.remote)
	_, known := r.fanOutKeys.Load(s.req.NamespacedName)
	if r.secretKind() && !asked && !known {
		return true, r.refuseOrdinarySecret(ctx, s) // a Secret is never an ordinary copy
	}
	if !asked && !known || s.mapErr != nil {
		return false, nil // an ordinary object; or an invalid name, which skipUnmappable reports
	}
	if !r.Resource.FanOutEnabled() {
		if !asked {
			return false, nil // copies left by an earlier configuration stay as they are
		}
		r.invalidFanOut(ctx, s, fmt.Errorf("namespace fan-out is not enabled for %s in region %s (resources[].fanOut.enabled)", r.Name(), r.Region))
		return true, nil
	}
	s.fanOut = true
	return true, nil
}

// fanOutPhases are the sync phases of a fan-out pass.
var fanOutPhases = []phase{(*Reconciler).fanOutPass}

// invalidFanOut reports a fan-out annotation that cannot be used: nothing is created or deleted.
func (r *Reconciler) invalidFanOut(ctx context.Context, s *scope, err error) {
	s.state = StateInvalid
	r.count(telemetry.DirectionDown, telemetry.ResultInvalid)
	msg := fmt.Sprintf("annotation %s on %s %s: %v; existing copies are kept, nothing is written", r.Keys.FanOutNamespaces, r.Name(), s.req.NamespacedName, err)
	logr.FromContextOrDiscard(ctx).Info("fan-out refused", "error", msg)
	r.RemoteEvents.Eventf(s.remote, nil, corev1.EventTypeWarning, ReasonInvalidFanOut, "Sync", "%s", msg)
}

// fanOutPass keeps the copies of a fan-out object: all of them deleted when it is gone or
// terminating (then its finalizer released), per namespace when fan-out was turned off or a
// namespace stopped matching, created or updated in every matching namespace otherwise.
//
// A pass queued by namespace events only, the object unchanged since its last complete full
// pass, is a narrow one (fanOutNarrowPass): it looks at those namespaces alone.
func (r *Reconciler) fanOutPass(ctx context.Context, s *scope) (bool, error) {
	key := s.req.NamespacedName
	now := time.Now()
	pending := r.fanOutPending.take(key)
	if sel, last, ok := r.fanOutNarrow(s, pending, now); ok {
		return true, r.fanOutNarrowPass(ctx, s, sel, pending, last, now)
	}
	r.fanOutLast.Delete(key) // set again by a complete full pass
	spec, asked := r.fanOutSpec(s.remote)
	copies, err := r.fanOutCopies(ctx, key, s, asked && s.remote.GetDeletionTimestamp().IsZero() && !r.secretKind())
	if err != nil {
		return true, err
	}
	if len(copies) > 0 {
		r.fanOutKeys.Store(key, struct{}{})
	}
	switch {
	case s.remote == nil:
		return true, r.fanOutRemoveAll(ctx, s, copies, true)
	case r.Keys.IsPaused(s.remote.GetAnnotations()):
		s.state = StatePaused
		r.count(telemetry.DirectionDown, telemetry.ResultPaused)
		return true, nil
	case !s.remote.GetDeletionTimestamp().IsZero():
		return true, r.fanOutRemoveAll(ctx, s, copies, false)
	case !asked:
		return true, r.fanOutTurnedOff(ctx, s, copies)
	}
	sel, err := parseFanOutSelector(spec)
	if err != nil {
		r.invalidFanOut(ctx, s, err)
		return true, nil
	}
	r.fanOutKeys.Store(key, struct{}{})
	if !controllerutil.ContainsFinalizer(s.remote, r.Keys.Finalizer) {
		if err := r.claim(ctx, s.remote); err != nil {
			s.state = StatePending
			return true, err
		}
	}
	targets, terminating, listed, err := r.fanOutTargets(ctx, s.remote, s.localKey.Name, sel)
	if err != nil {
		return true, err
	}
	noteNamespaces(ctx, listed)
	rep := r.fanOutSync(ctx, s, targets, copies)
	r.fanOutPrune(ctx, s, targets, terminating, copies, rep)
	r.publishFanOut(key, rep)
	if len(rep.failed) > 0 {
		s.fanOutFailed = true
	}
	if err := r.writeFanOutReport(ctx, s, rep); err != nil {
		return true, errors.Join(rep.err, err)
	}
	if !rep.more && rep.err == nil {
		// The object as this pass left it (its report written): a namespace event may now
		// cost that namespace alone.
		r.fanOutLast.Store(key, fanOutLastPass{resourceVersion: s.remote.GetResourceVersion(), failed: sets.New(rep.failed...)})
	}
	if rep.requeue > 0 {
		s.result = reconcile.Result{RequeueAfter: minRequeue(s.result.RequeueAfter, rep.requeue)}
	}
	if !s.result.IsZero() || rep.err != nil {
		s.state = StatePending
	}
	return true, rep.err
}

// minRequeue is the sooner of two requeue delays (zero: none).
func minRequeue(a, b time.Duration) time.Duration {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

// fanOutCopies returns the copies of the fan-out object key, by namespace, from the local cache.
// With own, the ordinary copy at its mapped name (marked with its UID, written before the object
// asked for fan-out) is one of them: it becomes the fan-out copy of its namespace, or is removed.
func (r *Reconciler) fanOutCopies(ctx context.Context, key types.NamespacedName, s *scope, own bool) (map[string]*unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(shard.ListGVK(r.GVK))
	if err := r.Local.List(ctx, list, client.MatchingLabels{r.Keys.Region: r.Region, r.Keys.FanOutSource: fanOutSourceHash(key)}); err != nil {
		return nil, fmt.Errorf("listing the fan-out copies of %s: %w", key, err)
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		c := &list.Items[i]
		if k, ok := r.fanOutSourceOf(c); ok && k == key && c.GetName() == s.localKey.Name {
			out[c.GetNamespace()] = c
		}
	}
	if own && s.remote != nil {
		local := r.newObject()
		err := r.Local.Get(ctx, s.localKey, local)
		switch {
		case err == nil:
			if _, taken := out[s.localKey.Namespace]; !taken && r.isMarked(local) && !r.isFanOutCopy(local) &&
				local.GetAnnotations()[r.Keys.RemoteUID] == string(s.remote.GetUID()) {
				out[s.localKey.Namespace] = local
			}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading local %s: %w", s.localKey, err)
		}
	}
	return out, nil
}

// fanOutTargets returns the namespaces that get a copy of remote (named name), sorted, and the
// terminating namespaces, and how many namespaces it looked at. The scope is the shard's (the namespaces its mapping reaches), or every
// namespace for a source namespace configured wide; never a protected namespace, and never the
// source's own namespace when management and the region are one cluster (the source, and the
// per-region object the hub wrote, live there under the same names).
func (r *Reconciler) fanOutTargets(ctx context.Context, remote *unstructured.Unstructured, name string, sel labels.Selector) (_ []string, _ sets.Set[string], listed int, _ error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.Namespaces.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil { // read only
		return nil, nil, 0, fmt.Errorf("listing local namespaces: %w", err)
	}
	nss := make([]namespaceInfo, len(list.Items))
	for i := range list.Items {
		ns := &list.Items[i]
		nss[i] = namespaceInfo{name: ns.Name, labels: ns.Labels, terminating: !ns.DeletionTimestamp.IsZero()}
	}
	targets, terminating := selectTargets(nss, sel, r.fanOutScopeFor(ctx, remote, name))
	return targets, terminating, len(nss), nil
}

// fanOutScopeFor is where the copies of remote (named name) may live.
func (r *Reconciler) fanOutScopeFor(ctx context.Context, remote *unstructured.Unstructured, name string) fanOutScope {
	scope := fanOutScope{protected: r.ProtectedNamespaces, inScope: r.inShardScope(name)}
	if r.Resource.FanOut != nil && slices.Contains(r.Resource.FanOut.WideSourceNamespaces, remote.GetNamespace()) {
		scope.inScope = func(string) bool { return true }
	}
	if r.SameCluster != nil && r.SameCluster(ctx) {
		scope.skip = remote.GetNamespace()
	}
	return scope
}

// inShardScope reports, for a copy named name, whether a local namespace is in the shard's
// namespace scope: the shard's mapping reaches it (prefix and local suffix).
func (r *Reconciler) inShardScope(name string) func(string) bool {
	return func(ns string) bool {
		_, err := r.Mapper.ToRemote(types.NamespacedName{Namespace: ns, Name: name})
		return err == nil
	}
}

// fanOutResult is what one fan-out pass found and did.
type fanOutResult struct {
	matching, current int
	// generation is the management object's generation the pass copied; hash, for a kind
	// without one, the hash of the content it copied (shard.Keys.AppliedContentHash).
	generation int64
	hash       string
	// failed are the matching namespaces whose copy failed (refused or not written), sorted.
	failed []string
	// requeue is when the pass must run again (zero: on the next event); more that it wrote
	// as many copies as one pass may and the rest are due at once.
	requeue time.Duration
	more    bool
	// err joins the writes that failed for a reason worth retrying with backoff.
	err error
}

// fanOutSync creates or updates the copy in every target namespace (at most maxFanOutWrites
// writes per pass, Resource.Concurrency at a time).
func (r *Reconciler) fanOutSync(ctx context.Context, s *scope, targets []string, copies map[string]*unstructured.Unstructured) *fanOutResult {
	rep := &fanOutResult{matching: len(targets), generation: s.remote.GetGeneration()}
	if rep.generation == 0 {
		rep.hash = r.Keys.AppliedContentHash(s.remote)
	}
	marks := r.fanOutMarks(s.req.NamespacedName)
	var mu sync.Mutex
	var errs []error
	writes := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(1, r.Resource.Concurrency))
	for _, ns := range targets {
		copyKey := types.NamespacedName{Namespace: ns, Name: s.localKey.Name}
		live := copies[ns]
		if live == nil {
			live = r.justCreated(copyKey) // created by a pass the cache has not caught up with
		} else {
			r.created.Delete(copyKey)
		}
		if live != nil && (r.Keys.IsPaused(live.GetAnnotations()) || !live.GetDeletionTimestamp().IsZero()) {
			if !live.GetDeletionTimestamp().IsZero() {
				rep.requeue = minRequeue(rep.requeue, waitRequeue) // recreated once gone
			}
			continue // paused: not written, not current
		}
		if live != nil && r.copyInSync(s.remote, copyKey, live, marks) {
			rep.current++
			r.count(telemetry.DirectionDown, telemetry.ResultUnchanged)
			continue
		}
		if live == nil {
			if wait, refused := r.recentlyRefused(copyKey); refused {
				rep.failed = append(rep.failed, ns)
				rep.requeue = minRequeue(rep.requeue, wait)
				continue
			}
		}
		if writes >= maxFanOutWrites {
			rep.requeue = minRequeue(rep.requeue, time.Millisecond) // the rest in the next pass
			rep.more = true
			continue
		}
		writes++
		g.Go(func() error {
			ok, wait, err := r.fanOutWrite(gctx, s.remote, copyKey, live, marks)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				rep.failed = append(rep.failed, ns)
				errs = append(errs, err)
			case ok:
				rep.current++
			case wait > 0:
				rep.failed = append(rep.failed, ns)
			}
			if wait > 0 {
				rep.requeue = minRequeue(rep.requeue, wait)
			}
			return nil
		})
	}
	_ = g.Wait()
	slices.Sort(rep.failed)
	rep.err = errors.Join(errs...)
	return rep
}

// fanOutWrite creates or updates one copy. ok reports a current copy; wait > 0 without ok a
// copy refused (an object that is not one is in the way) or held back, looked at again then.
func (r *Reconciler) fanOutWrite(ctx context.Context, remote *unstructured.Unstructured, copyKey types.NamespacedName, live *unstructured.Unstructured, marks *copyMarks) (ok bool, wait time.Duration, _ error) {
	if live == nil && r.Resource.Strategy == fleetspec.StrategyApply {
		// A server-side apply would take over an object that is not a copy: look first.
		existing, refused, err := r.existingFanOutCopy(ctx, remote, copyKey)
		if err != nil || refused {
			return false, unmarkedRecheck, err
		}
		live = existing
	}
	out, err := r.writeCopy(ctx, remote, copyKey, live, copyKey, marks)
	if apierrors.IsAlreadyExists(err) {
		existing, _, err := r.existingFanOutCopy(ctx, remote, copyKey)
		if err != nil || existing == nil {
			return false, unmarkedRecheck, err
		}
		out, err = r.writeCopy(ctx, remote, copyKey, existing, copyKey, marks)
		if err != nil {
			return false, 0, err
		}
	} else if err != nil {
		return false, 0, err
	}
	if live == nil {
		r.rememberCreated(copyKey, out)
		r.createdEvents.add(out, copyKey.String(), "fan-out copy of management object "+objectRef(remote).String())
	}
	if wait := r.fights.RetryAfter(copyKey, time.Now()); wait > 0 {
		return false, wait, nil
	}
	return true, 0, nil
}

// existingFanOutCopy reads the object at a copy's name from the API server (the cache shows only
// marked objects, and may lag): it is returned when it is this object's fan-out copy; anything
// else (unmarked, another object's copy) is refused, whatever the adoption policy says:
// fan-out never adopts. Nil when there is none, or it was refused.
func (r *Reconciler) existingFanOutCopy(ctx context.Context, remote *unstructured.Unstructured, copyKey types.NamespacedName) (_ *unstructured.Unstructured, refused bool, _ error) {
	existing := r.newObject()
	if err := r.LocalAPI.Get(ctx, copyKey, existing); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("reading local %s: %w", copyKey, err)
	}
	if k, ok := r.fanOutSourceOf(existing); ok && k == objectRef(remote) {
		return existing, false, nil
	}
	r.refuseFanOut(ctx, remote, copyKey, existing)
	return nil, true, nil
}

// refuseFanOut leaves an object that is not a copy alone, reports it on both sides and counts it;
// the namespace is looked at again after unmarkedRecheck.
func (r *Reconciler) refuseFanOut(ctx context.Context, remote *unstructured.Unstructured, copyKey types.NamespacedName, existing *unstructured.Unstructured) {
	r.refused.Store(copyKey, time.Now())
	r.count(telemetry.DirectionDown, telemetry.ResultRefused)
	what := "is not managed by regionsync"
	if r.isMarked(existing) {
		what = "is the copy of another management object"
	}
	msg := fmt.Sprintf("local %s exists and %s; namespace fan-out never adopts an object, it is left alone", copyKey, what)
	logr.FromContextOrDiscard(ctx).Info("fan-out copy refused", "local", copyKey, "reason", what)
	r.LocalEvents.Eventf(existing, nil, corev1.EventTypeWarning, ReasonAdoptionRefused, "FanOut", "%s (fan-out of management object %s)", msg, objectRef(remote))
	r.RemoteEvents.Eventf(remote, nil, corev1.EventTypeWarning, ReasonAdoptionRefused, "FanOut", "%s in region %s", msg, r.Region)
}

// recentlyRefused reports whether the copy at copyKey was refused less than unmarkedRecheck ago,
// and how long until it is looked at again.
func (r *Reconciler) recentlyRefused(copyKey types.NamespacedName) (time.Duration, bool) {
	at, ok := r.refused.Load(copyKey)
	if !ok {
		return 0, false
	}
	if left := unmarkedRecheck - time.Since(at); left > 0 {
		return left, true
	}
	r.refused.Delete(copyKey)
	return 0, false
}

// fanOutPrune deletes, each within the deletion budget as one unit, the copies in namespaces that
// no longer get one (a namespace that stopped matching, left the scope, or turned protected). A
// terminating namespace's copy goes with it; a paused copy stays.
func (r *Reconciler) fanOutPrune(ctx context.Context, s *scope, targets []string, terminating sets.Set[string], copies map[string]*unstructured.Unstructured, rep *fanOutResult) {
	keep := sets.New(targets...)
	var errs []error
	for _, ns := range slices.Sorted(maps.Keys(copies)) {
		live := copies[ns]
		if keep.Has(ns) || terminating.Has(ns) || !live.GetDeletionTimestamp().IsZero() || r.Keys.IsPaused(live.GetAnnotations()) {
			continue
		}
		why := fmt.Sprintf("namespace %s no longer matches the fan-out of management object %s", ns, s.req.NamespacedName)
		if wait, err := r.budgetedFanOutDelete(ctx, fanOutUnit(objectRef(live)), []*unstructured.Unstructured{live}, why); err != nil || wait > 0 {
			rep.requeue = minRequeue(rep.requeue, wait)
			errs = append(errs, err)
		}
	}
	rep.err = errors.Join(append(errs, rep.err)...)
}

// fanOutTurnedOff ends the fan-out of an object that no longer asks for it: the copy in its mapped
// namespace becomes its ordinary copy again (its fan-out marks removed), every other copy is
// removed, one budget unit per namespace; once none is left, the object is an ordinary one again.
// A Secret has no ordinary copy: every copy is removed, the mapped namespace's too.
func (r *Reconciler) fanOutTurnedOff(ctx context.Context, s *scope, copies map[string]*unstructured.Unstructured) error {
	if mapped, ok := copies[s.localKey.Namespace]; ok && !r.secretKind() && mapped.GetDeletionTimestamp().IsZero() && !r.Keys.IsPaused(mapped.GetAnnotations()) {
		if err := r.unmarkFanOut(ctx, mapped); err != nil {
			return err
		}
		delete(copies, s.localKey.Namespace)
	}
	rep := &fanOutResult{}
	r.fanOutPrune(ctx, s, nil, sets.New[string](), copies, rep)
	if len(copies) == 0 {
		r.forgetFanOut(s.req.NamespacedName)
		s.result = reconcile.Result{RequeueAfter: time.Millisecond} // on as an ordinary object
		return nil
	}
	s.state = StatePending
	s.result = reconcile.Result{RequeueAfter: max(rep.requeue, waitRequeue)}
	return rep.err
}

// unmarkFanOut removes a fan-out copy's source marks: it is the ordinary copy of its object again
// (it keeps the region's mark and the remote UID). The write fails when the copy changed since it
// was read.
func (r *Reconciler) unmarkFanOut(ctx context.Context, c *unstructured.Unstructured) error {
	unmarked := c.DeepCopy()
	lbls, annotations := unmarked.GetLabels(), unmarked.GetAnnotations()
	delete(lbls, r.Keys.FanOutSource)
	delete(annotations, r.Keys.FanOutSourceKey)
	unmarked.SetLabels(lbls)
	unmarked.SetAnnotations(annotations)
	err := r.write(ctx, sideLocal, "update local", unmarked, func(ctx context.Context) error {
		return r.Local.Patch(ctx, unmarked, client.MergeFromWithOptions(c, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil && !apierrors.IsNotFound(err) {
		r.countFailure(telemetry.DirectionDown, err)
		return fmt.Errorf("turning fan-out copy %s back into an ordinary copy: %w", objectRef(c), err)
	}
	r.count(telemetry.DirectionDown, telemetry.ResultWritten)
	return nil
}

// fanOutRemoveAll deletes every copy of a fan-out object that is gone (orphan) or terminating:
// one budget unit for the object, whatever its number of copies. Once no copy is left, a
// terminating object's finalizer is released. A vanished object's copies are deleted only after
// management itself answers "not found". Paused copies stay, and hold the finalizer.
func (r *Reconciler) fanOutRemoveAll(ctx context.Context, s *scope, copies map[string]*unstructured.Unstructured, orphan bool) error {
	key := s.req.NamespacedName
	if len(copies) == 0 {
		r.forgetFanOut(key)
		if orphan {
			s.state = stateGone
			return nil
		}
		s.state = StatePending
		return r.releaseFinalizer(ctx, s.remote, false)
	}
	s.state = StatePending
	var doomed []*unstructured.Unstructured
	paused := false
	for _, ns := range slices.Sorted(maps.Keys(copies)) {
		c := copies[ns]
		switch {
		case r.Keys.IsPaused(c.GetAnnotations()):
			paused = true
		case c.GetDeletionTimestamp().IsZero():
			doomed = append(doomed, c)
		}
	}
	if len(doomed) == 0 {
		if paused {
			r.count(telemetry.DirectionDelete, telemetry.ResultPaused)
			s.result = reconcile.Result{RequeueAfter: unmarkedRecheck}
		}
		return nil // the copies' deletion events bring the pass back
	}
	why := "management object " + key.String() + " is being deleted"
	if orphan {
		why = "management object " + key.String() + " no longer exists"
		live := r.newObject()
		switch err := r.RemoteAPI.Get(ctx, key, live); {
		case err == nil:
			if !r.Mapper.MatchesLabels(live.GetLabels()) {
				r.count(telemetry.DirectionDelete, telemetry.ResultHeld)
				r.LocalEvents.Eventf(doomed[0], nil, corev1.EventTypeWarning, ReasonOutOfShard, "Delete",
					"management object %s no longer matches the shard's label selector; its %d fan-out copies are kept", key, len(doomed))
				s.result = reconcile.Result{RequeueAfter: unmarkedRecheck}
				return nil
			}
			s.result = reconcile.Result{RequeueAfter: waitRequeue} // the cache is behind
			return nil
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("confirming that %s is gone from management: %w", key, err)
		}
	}
	wait, err := r.budgetedFanOutDelete(ctx, key, doomed, why)
	if wait > 0 {
		s.result = reconcile.Result{RequeueAfter: wait}
	}
	return err
}

// budgetedFanOutDelete deletes copies as one unit of the deletion budget (key): when the budget
// allows it, or an operator released one of them. wait > 0: held or judged later.
func (r *Reconciler) budgetedFanOutDelete(ctx context.Context, unit types.NamespacedName, copies []*unstructured.Unstructured, why string) (time.Duration, error) {
	released := slices.IndexFunc(copies, func(c *unstructured.Unstructured) bool {
		return r.Keys.IsReleased(c.GetAnnotations()) && r.Budget.ReleaseUsable(c.GetUID())
	})
	if released < 0 {
		allowed, result, err := r.budgetAllows(ctx, unit, copies[0])
		if err != nil || !allowed {
			return result.RequeueAfter, err
		}
	} else {
		why += " (deletion released with " + r.Keys.ReleaseDeletion + ")"
	}
	var errs []error
	for _, c := range copies {
		if err := r.deleteFanOutCopy(ctx, c, why); err != nil {
			errs = append(errs, err)
		}
	}
	r.Budget.Deleted(unit)
	if released >= 0 {
		r.Budget.UseRelease(copies[released].GetUID())
	}
	return 0, errors.Join(errs...)
}

// deleteFanOutCopy deletes one copy (never its namespace), with a UID precondition.
func (r *Reconciler) deleteFanOutCopy(ctx context.Context, c *unstructured.Unstructured, why string) error {
	uid := c.GetUID()
	err := r.write(ctx, sideLocal, "delete local", c, func(ctx context.Context) error {
		return r.Local.Delete(ctx, c, client.PropagationPolicy(r.Resource.DeletePropagation), client.Preconditions{UID: &uid})
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or another object now: nothing of ours to delete
	}
	if err != nil {
		r.count(telemetry.DirectionDelete, telemetry.ResultError)
		return fmt.Errorf("deleting fan-out copy %s: %w", objectRef(c), err)
	}
	r.count(telemetry.DirectionDelete, telemetry.ResultWritten)
	logr.FromContextOrDiscard(ctx).V(1).Info("deleted fan-out copy", "local", objectRef(c), "reason", why)
	r.deletedEvents.add(c, objectRef(c).String(), why)
	return nil
}

// forgetFanOut forgets what was remembered about a fan-out object.
func (r *Reconciler) forgetFanOut(key types.NamespacedName) {
	r.fanOutKeys.Delete(key)
	r.fanOutPending.forget(key)
	r.fanOutLast.Delete(key)
	r.reports.Delete(key)
	r.publishFanOut(key, nil)
}

// encodeFanOutReport is the report annotation's value for a pass's result.
func encodeFanOutReport(rep *fanOutResult) string {
	v := shard.FanOutReport{Matching: rep.matching, Current: rep.current, Failed: rep.failed, Generation: rep.generation, Hash: rep.hash}
	if len(v.Failed) > maxReportedFailures {
		v.Failed, v.MoreFailed = v.Failed[:maxReportedFailures], len(v.Failed)-maxReportedFailures
	}
	b, _ := json.Marshal(v) // a struct of ints and strings always encodes
	return string(b)
}

// reportWrite remembers when a report was last written on a fan-out object.
type reportWrite struct {
	value string
	at    time.Time
}

// writeFanOutReport writes the report on the remote object when it changed, at most once per
// FanOutReportInterval (a change within it is written when it ends).
func (r *Reconciler) writeFanOutReport(ctx context.Context, s *scope, rep *fanOutResult) error {
	value := encodeFanOutReport(rep)
	if s.remote.GetAnnotations()[r.Keys.FanOutReport] == value {
		return nil
	}
	key := s.req.NamespacedName
	last, ok := r.reports.Load(key)
	if ok && last.value == value {
		return nil // written; the cache has not caught up
	}
	if ok {
		if left := FanOutReportInterval - time.Since(last.at); left > 0 {
			s.result = reconcile.Result{RequeueAfter: minRequeue(s.result.RequeueAfter, left)}
			return nil
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"uid":         s.remote.GetUID(),
		"annotations": map[string]string{r.Keys.FanOutReport: value},
	}})
	if err != nil {
		return err
	}
	patched := s.remote.DeepCopy()
	err = r.write(ctx, sideManagement, "patch fan-out report", s.remote, func(ctx context.Context) error {
		return r.Remote.Patch(ctx, patched, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(shard.FieldManager))
	})
	if err != nil {
		r.countFailure(telemetry.DirectionMeta, err)
		return fmt.Errorf("writing the fan-out report on %s: %w", key, err)
	}
	r.reports.Store(key, reportWrite{value: value, at: time.Now()})
	s.remote.SetResourceVersion(patched.GetResourceVersion()) // the object with its report
	r.count(telemetry.DirectionMeta, telemetry.ResultWritten)
	return nil
}

// fanOutCounts are a kind's fan-out counts per object, summed into regionsync_fanout_namespaces.
type fanOutCounts struct {
	mu  sync.Mutex
	per map[types.NamespacedName][3]int
}

// publishFanOut records an object's counts (nil: forgets it) and publishes the kind's sums.
func (r *Reconciler) publishFanOut(key types.NamespacedName, rep *fanOutResult) {
	c := &r.fanOutCounts
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.per == nil {
		c.per = map[types.NamespacedName][3]int{}
	}
	if rep == nil {
		if _, ok := c.per[key]; !ok {
			return
		}
		delete(c.per, key)
	} else {
		c.per[key] = [3]int{rep.matching, rep.current, len(rep.failed)}
	}
	var sum [3]int
	for _, v := range c.per {
		for i := range sum {
			sum[i] += v[i]
		}
	}
	for i, state := range []string{"matching", "current", "failed"} {
		telemetry.FanOutNamespaces.WithLabelValues(r.Name(), state).Set(float64(sum[i]))
	}
}

// FanOutCopies returns the kind's fan-out counts summed over its fan-out objects: namespaces
// matching, copies current, namespaces failed.
func (r *Reconciler) FanOutCopies() (matching, current, failed int) {
	c := &r.fanOutCounts
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, v := range c.per {
		matching, current, failed = matching+v[0], current+v[1], failed+v[2]
	}
	return matching, current, failed
}

// releaseFinalizer removes the agent's finalizer from a terminating remote object.
func (r *Reconciler) releaseFinalizer(ctx context.Context, remote *unstructured.Unstructured, unmarkedLeft bool) error {
	if !controllerutil.ContainsFinalizer(remote, r.Keys.Finalizer) {
		return nil
	}
	before := remote.DeepCopy()
	controllerutil.RemoveFinalizer(remote, r.Keys.Finalizer)
	err := r.write(ctx, sideManagement, "release finalizer", remote, func(ctx context.Context) error {
		return r.Remote.Patch(ctx, remote, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		r.countFailure(telemetry.DirectionDelete, err)
		return client.IgnoreNotFound(fmt.Errorf("releasing finalizer of %s: %w", objectRef(remote), err))
	}
	r.count(telemetry.DirectionDelete, telemetry.ResultWritten)
	if unmarkedLeft {
		logr.FromContextOrDiscard(ctx).Info("remote finalizer released; the unmarked local object at the mapped name is not regionsync's copy and stays")
	} else {
		logr.FromContextOrDiscard(ctx).Info("local copies gone; remote finalizer released")
	}
	return nil
}

// fanOutCensus is what a census learned about the fan-out objects whose copies it met.
type fanOutCensus struct {
	sources map[types.NamespacedName]*fanOutSource
}

// fanOutSource is one fan-out object as the census sees it.
type fanOutSource struct {
	// doomed: gone from the management cache or terminating (and not paused); counted once.
	doomed, counted bool
	// keep are the namespaces that keep a copy (nil: every copy is kept, the selector being
	// invalid or the object paused; the mapped namespace only when it no longer asks for
	// fan-out), terminating those whose copies go with them.
	keep, terminating sets.Set[string]
}

// countFanOutCopy counts one fan-out copy in the census. A fan-out object gone or terminating is
// one live and one doomed unit whatever its number of copies (one intent on management, so
// deleting it is never held for its copies alone); otherwise each copy is one live unit, and
// doomed when its namespace no longer gets one (one unit per namespace, so a selector typo that
// would remove every copy is held like everything vanishing).
func (r *Reconciler) countFanOutCopy(ctx context.Context, c *budget.Census, fan *fanOutCensus, key types.NamespacedName, local *unstructured.Unstructured) error {
	if !local.GetDeletionTimestamp().IsZero() {
		return nil
	}
	src, ok := fan.sources[key]
	if !ok {
		var err error
		if src, err = r.fanOutSourceState(ctx, key, local.GetName()); err != nil {
			return err
		}
		fan.sources[key] = src
	}
	switch {
	case src.doomed:
		if !src.counted {
			src.counted = true
			c.Live++
			c.Doomed[key] = objectRef(local)
		}
	case r.Keys.IsPaused(local.GetAnnotations()):
		c.Live++
	default:
		c.Live++
		if src.keep != nil && !src.keep.Has(local.GetNamespace()) && !src.terminating.Has(local.GetNamespace()) {
			c.Doomed[fanOutUnit(objectRef(local))] = objectRef(local)
		}
	}
	return nil
}

// fanOutSourceState reads a fan-out object from the management cache and the namespaces that
// keep its copies (named name).
func (r *Reconciler) fanOutSourceState(ctx context.Context, key types.NamespacedName, name string) (*fanOutSource, error) {
	remote := r.newObject()
	switch err := r.Remote.Get(ctx, key, remote); {
	case apierrors.IsNotFound(err):
		return &fanOutSource{doomed: true}, nil
	case err != nil:
		return nil, err
	}
	paused := r.Keys.IsPaused(remote.GetAnnotations())
	if !remote.GetDeletionTimestamp().IsZero() {
		return &fanOutSource{doomed: !paused}, nil
	}
	spec, asked := r.fanOutSpec(remote)
	if !asked {
		if paused {
			return &fanOutSource{}, nil
		}
		// Every copy goes but the one in the mapped namespace, which becomes the ordinary copy
		// (a Secret has none: every copy goes).
		keep := sets.New[string]()
		if local, err := r.Mapper.ToLocal(key); err == nil && !r.secretKind() {
			keep.Insert(local.Namespace)
		}
		return &fanOutSource{keep: keep, terminating: sets.New[string]()}, nil
	}
	sel, err := parseFanOutSelector(spec)
	if err != nil || paused || r.Namespaces == nil {
		return &fanOutSource{}, nil
	}
	targets, terminating, _, err := r.fanOutTargets(ctx, remote, name, sel)
	if err != nil {
		return nil, err
	}
	return &fanOutSource{keep: sets.New(targets...), terminating: terminating}, nil
}
