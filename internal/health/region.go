// Package health is a region's health: the agent's liveness and readiness probes, the Region
// status on the management cluster (written by the leader while it holds the region's shard
// Lease) and the local cluster ID that identifies the fleet.
package health

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/shard/claim"
	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/config"
)

// ClusterID returns the UID of the cluster's kube-system namespace, the conventional cluster ID.
func ClusterID(ctx context.Context, c client.Reader) (string, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading the local cluster ID (namespace kube-system): %w", err)
	}
	return string(ns.UID), nil
}

// Sources are what the reporter reads the region's health from.
type Sources struct {
	ManagementConnected func() bool
	Claim               func() claim.State
	Stats               func() []syncer.Stats
	// LocalReady reports whether the local caches are synced.
	LocalReady func() bool
}

// Reporter keeps the status of the Region named after the agent's region current. It writes only
// when the status changed (at most every MinInterval) and refreshes the heartbeat every Refresh.
// It never creates the Region: the operator does when adding the region.
type Reporter struct {
	// Client reads and writes Regions on management (directly, not cached).
	Client client.Client
	Region string

	Leader, ClusterID, AgentVersion, Shard string
	Sources                                Sources

	MinInterval time.Duration // default 2s
	Refresh     time.Duration // default config.DefaultHeartbeatInterval
	Log         logr.Logger

	lastWritten *regionsyncv1alpha1.RegionStatus
	lastWrite   time.Time
	missing     bool
	// notBefore delays the next look for a Region that does not exist (one read per Refresh).
	notBefore time.Time
}

// Run reports until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	if r.MinInterval == 0 {
		r.MinInterval = 2 * time.Second
	}
	if r.Refresh == 0 {
		r.Refresh = config.DefaultHeartbeatInterval
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		if err := r.report(ctx, time.Now()); err != nil && ctx.Err() == nil {
			r.Log.Error(err, "publishing the Region status")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// report writes the status if it changed (rate-limited) or the refresh is due.
func (r *Reporter) report(ctx context.Context, now time.Time) error {
	if (!r.lastWrite.IsZero() && now.Sub(r.lastWrite) < r.MinInterval) || now.Before(r.notBefore) {
		return nil
	}
	region := &regionsyncv1alpha1.Region{}
	want := r.desired(nil)
	if r.lastWritten != nil && sameStatus(r.lastWritten, &want) && now.Sub(r.lastWrite) < r.Refresh {
		return nil
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Region}, region); err != nil {
		if apierrors.IsNotFound(err) {
			if !r.missing {
				r.Log.Info("Region object does not exist on management; the operator creates it when adding a region (the agent only updates its status)", "region", r.Region)
				r.missing = true
			}
			r.notBefore = now.Add(r.Refresh)
			return nil
		}
		return err
	}
	r.missing = false
	status := r.desired(region.Status.Conditions)
	status.HeartbeatTime = &metav1.Time{Time: now}
	region.Status = status
	if err := r.Client.Status().Update(ctx, region, client.FieldOwner(shard.FieldManager)); err != nil {
		return fmt.Errorf("updating Region %s status: %w", r.Region, err)
	}
	r.lastWritten, r.lastWrite = status.DeepCopy(), now
	return nil
}

// sameStatus compares two statuses, ignoring the heartbeat and condition transition times.
func sameStatus(a, b *regionsyncv1alpha1.RegionStatus) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	x.HeartbeatTime, y.HeartbeatTime = nil, nil
	for _, s := range []*regionsyncv1alpha1.RegionStatus{x, y} {
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
	}
	return reflect.DeepEqual(x, y)
}

// desired computes the status; previous conditions keep their transition times.
func (r *Reporter) desired(previous []metav1.Condition) regionsyncv1alpha1.RegionStatus {
	st := regionsyncv1alpha1.RegionStatus{
		Leader: r.Leader, ClusterID: r.ClusterID, AgentVersion: r.AgentVersion, Shard: r.Shard,
		Conditions: append([]metav1.Condition(nil), previous...),
	}
	connected := r.Sources.ManagementConnected()
	shardClaim := r.Sources.Claim()
	var bad, held int32
	var last time.Time
	for _, s := range r.Sources.Stats() {
		c := regionsyncv1alpha1.ResourceCounts{
			Resource: s.Resource,
			Synced:   int32(s.Counts[syncer.StateSynced]), Pending: int32(s.Counts[syncer.StatePending]),
			Failed: int32(s.Counts[syncer.StateFailed]), Paused: int32(s.Counts[syncer.StatePaused]),
			Invalid: int32(s.Counts[syncer.StateInvalid]), DeletionsHeld: int32(s.DeletionsHeld),
		}
		st.Resources = append(st.Resources, c)
		bad += c.Pending + c.Failed + c.Invalid
		held += c.DeletionsHeld
		if s.LastSync.After(last) {
			last = s.LastSync
		}
	}
	if !last.IsZero() {
		st.LastSyncTime = &metav1.Time{Time: last.Truncate(time.Second)}
	}
	set := func(t string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg})
	}
	if connected {
		set(regionsyncv1alpha1.ConditionManagementConnected, true, regionsyncv1alpha1.ReasonConnected, "the management API server answers")
	} else {
		set(regionsyncv1alpha1.ConditionManagementConnected, false, regionsyncv1alpha1.ReasonUnreachable, "the management API server does not answer; local copies are kept")
	}
	set(regionsyncv1alpha1.ConditionShardClaimed, shardClaim.Syncing, shardClaim.Reason, shardClaim.Message)
	synced := shardClaim.Syncing && bad == 0 && (r.Sources.LocalReady == nil || r.Sources.LocalReady())
	if synced {
		set(regionsyncv1alpha1.ConditionSynced, true, regionsyncv1alpha1.ReasonSynced, "every object of the shard is in sync or paused")
	} else {
		set(regionsyncv1alpha1.ConditionSynced, false, regionsyncv1alpha1.ReasonNotSynced, fmt.Sprintf("%d objects pending, failed or invalid", bad))
	}
	if held > 0 {
		set(regionsyncv1alpha1.ConditionDeletionsHeld, true, regionsyncv1alpha1.ReasonBudgetExceeded,
			fmt.Sprintf("%d local deletions are held by the deletion budget; see DeletionHeld events", held))
	} else {
		set(regionsyncv1alpha1.ConditionDeletionsHeld, false, regionsyncv1alpha1.ReasonNoneHeld, "no deletion is held")
	}
	ready := connected && shardClaim.Syncing && synced && held == 0
	switch {
	case ready:
		set(regionsyncv1alpha1.ConditionReady, true, regionsyncv1alpha1.ReasonReady, "the region is in sync")
	case !shardClaim.Syncing:
		set(regionsyncv1alpha1.ConditionReady, false, shardClaim.Reason, shardClaim.Message)
	default:
		set(regionsyncv1alpha1.ConditionReady, false, regionsyncv1alpha1.ReasonNotReady, "see the other conditions")
	}
	return st
}
