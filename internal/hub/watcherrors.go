package hub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
)

// EventCannotWatch is the Warning Event of a Distribution whose kind the hub cannot list and
// watch (its ClusterRole lacks the rule, or the kind is not served).
const EventCannotWatch = "CannotWatch"

// cannotWatchRetry is how often a Distribution waiting for a kind the hub cannot watch is
// looked at again (the cache's own retries go on meanwhile, with client-go's backoff).
const cannotWatchRetry = 10 * time.Second

// kindNotSynced is errNotSynced for one kind: the per-region objects' cache of gvk has not
// synced yet.
type kindNotSynced struct{ gvk schema.GroupVersionKind }

// Error names the kind.
func (e *kindNotSynced) Error() string {
	return fmt.Sprintf("the per-region objects' cache of %s has not synced yet", shard.KindName(e.gvk))
}

// Is makes a kindNotSynced an errNotSynced.
func (e *kindNotSynced) Is(target error) bool { return target == errNotSynced }

// watchErrors remembers, per kind, the last error of the per-region objects' cache listing or
// watching it (a kind the hub may not list, a kind no longer served), so that a Distribution
// waiting for that cache says why instead of waiting in silence.
type watchErrors struct {
	mu     sync.Mutex
	byKind map[string]string // the reflector's type description (the GVK) → the error
}

// handle is the cache's watch error handler: it records err for the reflector's kind and logs
// it as client-go does by default.
func (w *watchErrors) handle(ctx context.Context, r *toolscache.Reflector, err error) {
	w.mu.Lock()
	if w.byKind == nil {
		w.byKind = map[string]string{}
	}
	w.byKind[r.TypeDescription()] = err.Error()
	w.mu.Unlock()
	toolscache.DefaultWatchErrorHandler(ctx, r, err)
}

// get returns the last error listing or watching gvk ("" when none, or w is nil).
func (w *watchErrors) get(gvk schema.GroupVersionKind) string {
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byKind[gvk.String()]
}

// waitForKind is what a reconcile does when a per-region objects' cache has not synced: wait a
// moment, or, when the cache failed to list or watch the kind, say so in Applied=False (naming
// the kind, the error and the rule the hub lacks) and a Warning Event, and look again later.
// Nothing placed is changed meanwhile.
func (r *DistributionReconciler) waitForKind(ctx context.Context, d *regionsyncv1alpha1.Distribution, err error) (ctrl.Result, error) {
	var ns *kindNotSynced
	if !errors.As(err, &ns) {
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, nil
	}
	cause := r.watchErrs.get(ns.gvk)
	if cause == "" {
		return ctrl.Result{RequeueAfter: 500 * time.Millisecond}, nil
	}
	msg := fmt.Sprintf("the hub cannot list and watch %s, so it cannot tell what this Distribution has placed; nothing is changed until it can: %s; "+
		"grant the hub's ServiceAccount get, list and watch on it (a rule in its ClusterRole)", shard.KindName(ns.gvk), cause)
	if c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied); c != nil && c.Reason == regionsyncv1alpha1.ReasonCannotWatch && c.Message == msg {
		return ctrl.Result{RequeueAfter: cannotWatchRetry}, nil
	}
	r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, EventCannotWatch, eventActionPlace, "%s", msg)
	orig := d.DeepCopy()
	meta.SetStatusCondition(&d.Status.Conditions, metav1.Condition{
		Type: regionsyncv1alpha1.DistributionApplied, Status: metav1.ConditionFalse,
		Reason: regionsyncv1alpha1.ReasonCannotWatch, Message: msg, ObservedGeneration: d.Generation,
	})
	if err := r.Client.Status().Patch(ctx, d, client.MergeFrom(orig), client.FieldOwner(FieldManager)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("writing the status of Distribution %s: %w", client.ObjectKeyFromObject(d), err)
	}
	return ctrl.Result{RequeueAfter: cannotWatchRetry}, nil
}
