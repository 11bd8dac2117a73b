package hub

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/shard/claim"
)

// LivenessReconciler judges each region's heartbeat, its shard Lease, the way the node lifecycle
// controller judges a Node's: on the hub's own clock, by when it saw the Lease's renew time
// change (never by comparing the region's clock with its own). A region whose Lease it has not
// seen renewed for the Lease's duration plus Grace gets Ready=Unknown (HeartbeatMissed) on its
// Region; the region's agent owns Ready and replaces it on its next report. A new leader of the
// hub starts every region's clock when it first looks, so it gives every region one lease (plus
// the grace) before judging it.
type LivenessReconciler struct {
	// Client reads Regions and Leases (cached) and writes the Region status.
	Client client.Client
	// Namespace holds the shard Leases.
	Namespace string
	// Grace is added to the Lease's duration.
	Grace time.Duration
	// Now is the clock (time.Now).
	Now func() time.Time

	mu     sync.Mutex
	seen   map[string]renewal
	missed regionSet
}

// renewal is a Lease renew time and when the hub first saw it.
type renewal struct {
	renew string
	at    time.Time
}

// SetupWithManager registers the controller (regionsync-hub-liveness): Regions, and the shard
// Leases mapped to their Region.
func (r *LivenessReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.seen = map[string]renewal{}
	r.missed.gauge = HeartbeatMissed
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&regionsyncv1alpha1.Region{}).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			region, ok := strings.CutPrefix(o.GetName(), claim.LeaseName(""))
			if !ok || o.GetNamespace() != r.Namespace {
				return nil
			}
			return []ctrl.Request{{NamespacedName: types.NamespacedName{Name: region}}}
		})).
		Named("regionsync-hub-liveness").
		Complete(r)
}

// Reconcile looks at one Region's Lease and marks the Region when its heartbeat is missed.
func (r *LivenessReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	region := &regionsyncv1alpha1.Region{}
	if err := r.Client.Get(ctx, req.NamespacedName, region); err != nil {
		if apierrors.IsNotFound(err) {
			r.mu.Lock()
			delete(r.seen, req.Name)
			r.mu.Unlock()
			r.missed.set(req.Name, false)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	r.missed.set(region.Name, heartbeatMissed(region))
	lease := &coordinationv1.Lease{}
	leaseKey := types.NamespacedName{Namespace: r.Namespace, Name: claim.LeaseName(region.Name)}
	hasLease := true
	if err := r.Client.Get(ctx, leaseKey, lease); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		hasLease = false
	}
	duration := fleetspec.DefaultClaimLeaseDuration
	renew := ""
	if hasLease {
		if s := lease.Spec.LeaseDurationSeconds; s != nil && *s > 0 {
			duration = time.Duration(*s) * time.Second
		}
		if rt := lease.Spec.RenewTime; rt != nil {
			renew = rt.UTC().Format(time.RFC3339Nano)
		}
	}
	now := r.Now()
	r.mu.Lock()
	s, ok := r.seen[region.Name]
	if !ok || s.renew != renew {
		s = renewal{renew: renew, at: now}
		r.seen[region.Name] = s
	}
	r.mu.Unlock()
	deadline := s.at.Add(duration + r.Grace)
	if now.Before(deadline) {
		return ctrl.Result{RequeueAfter: deadline.Sub(now) + 100*time.Millisecond}, nil
	}
	ready := meta.FindStatusCondition(region.Status.Conditions, regionsyncv1alpha1.ConditionReady)
	if ready == nil || (ready.Status == metav1.ConditionUnknown && ready.Reason == regionsyncv1alpha1.ReasonHeartbeatMissed) {
		// Nothing reported yet (no agent ever ran), or already said.
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("the hub has not seen the shard Lease %s renewed for %s (its lease duration %s + grace %s)", leaseKey, now.Sub(s.at).Round(time.Second), duration, r.Grace)
	if !hasLease {
		msg = fmt.Sprintf("the shard Lease %s does not exist (for %s: lease duration %s + grace %s)", leaseKey, now.Sub(s.at).Round(time.Second), duration, r.Grace)
	}
	meta.SetStatusCondition(&region.Status.Conditions, metav1.Condition{
		Type: regionsyncv1alpha1.ConditionReady, Status: metav1.ConditionUnknown,
		Reason: regionsyncv1alpha1.ReasonHeartbeatMissed, Message: msg + "; the region's agent clears it on its next report",
	})
	if err := r.Client.Status().Update(ctx, region, client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return ctrl.Result{}, fmt.Errorf("marking Region %s HeartbeatMissed: %w", region.Name, err)
	}
	r.missed.set(region.Name, true)
	return ctrl.Result{}, nil
}

// heartbeatMissed reports whether a Region's Ready condition is Unknown (HeartbeatMissed).
func heartbeatMissed(region *regionsyncv1alpha1.Region) bool {
	c := meta.FindStatusCondition(region.Status.Conditions, regionsyncv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == regionsyncv1alpha1.ReasonHeartbeatMissed
}
