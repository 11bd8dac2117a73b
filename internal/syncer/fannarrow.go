package syncer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A namespace event costs what one namespace costs, not what the fan-out does: it notes its
// namespace on every fan-out object it queues (namespaceHandler), and the object's next pass,
// when nothing else changed since its last full pass, looks at those namespaces only: one
// namespace read and one copy read from the caches, and the write or delete that namespace needs
// (fanOutNarrowPass). The counts a narrow pass cannot know (the report on management,
// regionsync_fanout_namespaces) are recounted by a full pass fanOutRecount after the first
// narrow pass, once for any number of namespace events within it.

const (
	// fanOutRecount is how long after a narrow pass the object's full pass follows.
	fanOutRecount = 5 * time.Second
	// maxNarrowNamespaces is the most namespaces a narrow pass looks at: more pending events
	// than that and the next pass is a full one (one list costs less than that many reads).
	maxNarrowNamespaces = 32
)

// pendingNamespaces are, per fan-out object, the namespaces whose events queued it since its
// last pass.
type pendingNamespaces struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*pendingSet
}

// pendingSet is one object's pending namespaces; all when they cannot all be named (too many,
// or an event without a name): the next pass is a full one.
type pendingSet struct {
	names sets.Set[string]
	all   bool
}

// add notes namespace ns ("" for one not known) for the fan-out object key.
func (p *pendingNamespaces) add(key types.NamespacedName, ns string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.NamespacedName]*pendingSet{}
	}
	ps := p.m[key]
	if ps == nil {
		ps = &pendingSet{names: sets.New[string]()}
		p.m[key] = ps
	}
	if ps.all {
		return
	}
	if ns == "" || ps.names.Len() >= maxNarrowNamespaces {
		ps.all, ps.names = true, nil
		return
	}
	ps.names.Insert(ns)
}

// take returns, sorted, and forgets the namespaces pending for key; nil when there are none, or
// when they cannot all be named.
func (p *pendingNamespaces) take(key types.NamespacedName) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.m[key]
	delete(p.m, key)
	if ps == nil || ps.all {
		return nil
	}
	return sets.List(ps.names)
}

// forget drops what is pending for key.
func (p *pendingNamespaces) forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// fanOutLastPass is what a fan-out object's last complete full pass left: the management
// object's resourceVersion it saw, the matching namespaces without a current copy, and, once a
// narrow pass followed, when the next full pass is due.
type fanOutLastPass struct {
	resourceVersion string
	failed          sets.Set[string]
	recountDue      time.Time
}

// fanOutNarrow returns the selector a narrow pass over pending uses, and what the last full pass
// left, when one may run: the management object is the one the last complete full pass saw (its
// selector, its content), its recount is not due, it asks for fan-out, is not paused or
// terminating and holds the finalizer, and no pending namespace is its mapped one (whose
// ordinary copy only a full pass turns into a fan-out copy).
func (r *Reconciler) fanOutNarrow(s *scope, pending []string, now time.Time) (labels.Selector, fanOutLastPass, bool) {
	last, ok := r.fanOutLast.Load(s.req.NamespacedName)
	if !ok || len(pending) == 0 || s.remote == nil || s.remote.GetResourceVersion() != last.resourceVersion ||
		!last.recountDue.IsZero() && !now.Before(last.recountDue) || slices.Contains(pending, s.localKey.Namespace) ||
		!s.remote.GetDeletionTimestamp().IsZero() || r.Keys.IsPaused(s.remote.GetAnnotations()) ||
		!controllerutil.ContainsFinalizer(s.remote, r.Keys.Finalizer) {
		return nil, fanOutLastPass{}, false
	}
	spec, asked := r.fanOutSpec(s.remote)
	if !asked {
		return nil, fanOutLastPass{}, false
	}
	sel, err := parseFanOutSelector(spec)
	if err != nil {
		return nil, fanOutLastPass{}, false
	}
	return sel, last, true
}

// fanOutNarrowPass keeps the copies of a fan-out object in the namespaces pending only: it creates
// or updates the copy of a namespace that gets one, deletes (within the deletion budget) the copy
// of one that no longer does, and leaves a namespace that is gone or terminating to take its copy
// with it. The object's state joins the failures of its last full pass outside these namespaces
// with this pass's; its full pass follows when the recount is due. What it must look at again
// stays pending.
func (r *Reconciler) fanOutNarrowPass(ctx context.Context, s *scope, sel labels.Selector, pending []string, last fanOutLastPass, now time.Time) error {
	key := s.req.NamespacedName
	scope := r.fanOutScopeFor(ctx, s.remote, s.localKey.Name)
	var nss []namespaceInfo
	copies := map[string]*unstructured.Unstructured{}
	for _, name := range pending {
		ns := namespacePrototype()
		switch err := r.Namespaces.Get(ctx, types.NamespacedName{Name: name}, ns); {
		case apierrors.IsNotFound(err):
			nss = append(nss, namespaceInfo{name: name, terminating: true}) // gone: its copy with it
		case err != nil:
			return fmt.Errorf("reading local namespace %s: %w", name, err)
		default:
			nss = append(nss, namespaceInfo{name: name, labels: ns.Labels, terminating: !ns.DeletionTimestamp.IsZero()})
		}
		c := r.newObject()
		switch err := r.Local.Get(ctx, types.NamespacedName{Namespace: name, Name: s.localKey.Name}, c); {
		case err == nil:
			if k, ok := r.fanOutSourceOf(c); ok && k == key {
				copies[name] = c
			}
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("reading local %s/%s: %w", name, s.localKey.Name, err)
		}
	}
	noteNamespaces(ctx, len(pending))
	targets, terminating := selectTargets(nss, sel, scope)
	rep := r.fanOutSync(ctx, s, targets, copies)
	r.fanOutPrune(ctx, s, targets, terminating, copies, rep)

	failed := last.failed.Clone().Delete(pending...).Insert(rep.failed...)
	if last.recountDue.IsZero() {
		last.recountDue = now.Add(fanOutRecount)
	}
	r.fanOutLast.Store(key, fanOutLastPass{resourceVersion: last.resourceVersion, failed: failed, recountDue: last.recountDue})
	s.fanOutFailed = failed.Len() > 0
	s.recountAfter = max(time.Millisecond, last.recountDue.Sub(now))
	if rep.requeue > 0 || rep.err != nil {
		// Looked at again (a deletion the budget judges later, a copy refused or failed): the
		// same namespaces, narrowly again while the object stays as it is.
		for _, ns := range pending {
			r.fanOutPending.add(key, ns)
		}
		s.state = StatePending
	}
	if rep.requeue > 0 {
		s.result = reconcile.Result{RequeueAfter: rep.requeue}
	}
	return rep.err
}
