// Package health is a region's health: the agent's liveness and readiness probes, the Region
// status on the management cluster (written by the leader while it holds the region's shard
// Lease) and the local cluster ID that identifies the fleet.
package health

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
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

// Claim is the shard claim as the Region reports it.
type Claim struct {
	// Syncing: the claim is held and no overlapping live shard stops the agent.
	Syncing bool
	// Reason and Message explain the claim (a shard claim reason of the Region API).
	Reason, Message string
}

// KindStats is what one synced kind reports: its objects by state and when it last synced.
type KindStats struct {
	regionsyncv1alpha1.ResourceCounts
	LastSync time.Time
}

// Sources are what the reporter reads the region's health from. The reporter knows neither the
// engine nor the claim: the agent wires them in (pkg/regionsync), so health depends only on the
// Region API.
type Sources struct {
	ManagementConnected func() bool
	Claim               func() Claim
	Stats               func() []KindStats
	// FirstPassDone reports whether every kind's caches synced and its first pass over the shard
	// finished; until then the region is neither Synced nor Ready.
	FirstPassDone func() bool
}

// Reporter keeps the status of the Region named after the agent's region current. It writes only
// when the status changed (at most every MinInterval) and refreshes the heartbeat every Refresh.
// It never creates the Region: the operator does when adding the region.
type Reporter struct {
	// Client reads, watches and writes Regions on management (directly, not cached).
	Client client.WithWatch
	Region string

	Leader, ClusterID, AgentVersion, Shard string
	Sources                                Sources

	MinInterval time.Duration // default 2s
	Refresh     time.Duration // default config.DefaultHeartbeatInterval
	Log         logr.Logger

	// lastWritten is the status as last written or found current; lastWrite when the agent last
	// wrote; lastBeat the heartbeat on the Region.
	lastWritten *regionsyncv1alpha1.RegionStatus
	lastWrite   time.Time
	lastBeat    time.Time
	missing     bool
	// notBefore delays the next look for a Region that does not exist (one read per Refresh).
	notBefore time.Time
}

// Run reports until ctx ends. It watches its Region, so a Region created (or changed by another
// writer) is acted on within a tick, without polling management for it.
func (r *Reporter) Run(ctx context.Context) {
	if r.MinInterval == 0 {
		r.MinInterval = 2 * time.Second
	}
	if r.Refresh == 0 {
		r.Refresh = config.DefaultHeartbeatInterval
	}
	kick := make(chan struct{}, 1)
	go r.watch(ctx, kick)
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
		case <-kick:
			r.notBefore, r.lastWritten = time.Time{}, nil // look at the Region as it is now
		}
	}
}

// watch sends on kick whenever the Region changes (created, deleted, written by anyone), until
// ctx ends; a broken watch is started again.
func (r *Reporter) watch(ctx context.Context, kick chan<- struct{}) {
	for ctx.Err() == nil {
		w, err := r.Client.Watch(ctx, &regionsyncv1alpha1.RegionList{}, client.MatchingFields{"metadata.name": r.Region})
		if err == nil {
			for range w.ResultChan() {
				select {
				case kick <- struct{}{}:
				default:
				}
			}
			w.Stop()
		} else {
			r.Log.V(1).Info("watching the Region; retrying", "error", err.Error())
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// report writes the status when the agent's part of it changed (rate-limited) or the heartbeat
// is due; conditions other writers set are kept and never cause a write.
func (r *Reporter) report(ctx context.Context, now time.Time) error {
	if (!r.lastWrite.IsZero() && now.Sub(r.lastWrite) < r.MinInterval) || now.Before(r.notBefore) {
		return nil
	}
	want := r.desired(nil)
	if r.lastWritten != nil && sameOwnStatus(r.lastWritten, &want) && now.Sub(r.lastBeat) < r.Refresh {
		return nil
	}
	region := &regionsyncv1alpha1.Region{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Region}, region); err != nil {
		if apierrors.IsNotFound(err) {
			if !r.missing {
				r.Log.Info("Region object does not exist on management; the operator creates it when adding a region (the agent only updates its status)", "region", r.Region)
				r.missing = true
			}
			r.notBefore = now.Add(r.Refresh) // the watch says when it appears
			return nil
		}
		return err
	}
	r.missing = false
	status := r.desired(region.Status.Conditions)
	current := region.Status.DeepCopy()
	if hb := current.HeartbeatTime; hb != nil && now.Sub(hb.Time) < r.Refresh && sameStatus(current, &status) {
		// Nothing but the heartbeat would change, and it is not due.
		r.lastWritten, r.lastBeat = status.DeepCopy(), hb.Time
		return nil
	}
	status.HeartbeatTime = &metav1.Time{Time: now}
	region.Status = status
	if err := r.Client.Status().Update(ctx, region, client.FieldOwner(shard.FieldManager)); err != nil {
		return fmt.Errorf("updating Region %s status: %w", r.Region, err)
	}
	r.lastWritten, r.lastWrite, r.lastBeat = status.DeepCopy(), now, now
	return nil
}

// ownConditions are the condition types the agent sets; others belong to other writers.
var ownConditions = map[string]bool{
	regionsyncv1alpha1.ConditionReady: true, regionsyncv1alpha1.ConditionManagementConnected: true,
	regionsyncv1alpha1.ConditionShardClaimed: true, regionsyncv1alpha1.ConditionSynced: true,
	regionsyncv1alpha1.ConditionDeletionsHeld: true,
}

// sameStatus compares two statuses, ignoring the heartbeat and condition transition times.
func sameStatus(a, b *regionsyncv1alpha1.RegionStatus) bool {
	x, y := a.DeepCopy(), b.DeepCopy()
	x.HeartbeatTime, y.HeartbeatTime = nil, nil
	for _, s := range []*regionsyncv1alpha1.RegionStatus{x, y} {
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
			s.Conditions[i].ObservedGeneration = 0
		}
		if len(s.Conditions) == 0 {
			s.Conditions = nil
		}
	}
	return reflect.DeepEqual(x, y)
}

// sameOwnStatus is sameStatus over the agent's own conditions only.
func sameOwnStatus(a, b *regionsyncv1alpha1.RegionStatus) bool {
	own := func(s *regionsyncv1alpha1.RegionStatus) *regionsyncv1alpha1.RegionStatus {
		c := s.DeepCopy()
		c.Conditions = nil
		for _, cond := range s.Conditions {
			if ownConditions[cond.Type] {
				c.Conditions = append(c.Conditions, cond)
			}
		}
		return c
	}
	return sameStatus(own(a), own(b))
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
	var heldKinds []string
	var last time.Time
	for _, s := range r.Sources.Stats() {
		c := s.ResourceCounts
		st.Resources = append(st.Resources, c)
		bad += c.Pending + c.Failed + c.Invalid
		held += c.DeletionsHeld
		if c.DeletionsHeld > 0 {
			heldKinds = append(heldKinds, fmt.Sprintf("%s: %d", s.Resource, c.DeletionsHeld))
		}
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
	firstPass := r.Sources.FirstPassDone == nil || r.Sources.FirstPassDone()
	synced := shardClaim.Syncing && bad == 0 && firstPass
	switch {
	case synced:
		set(regionsyncv1alpha1.ConditionSynced, true, regionsyncv1alpha1.ReasonSynced, "every object of the shard is in sync or paused")
	case shardClaim.Syncing && !firstPass:
		set(regionsyncv1alpha1.ConditionSynced, false, regionsyncv1alpha1.ReasonNotSynced,
			"not every kind's caches have synced and finished a first pass over the shard")
	default:
		set(regionsyncv1alpha1.ConditionSynced, false, regionsyncv1alpha1.ReasonNotSynced, fmt.Sprintf("%d objects pending, failed or invalid", bad))
	}
	if held > 0 {
		set(regionsyncv1alpha1.ConditionDeletionsHeld, true, regionsyncv1alpha1.ReasonBudgetExceeded,
			fmt.Sprintf("%d local deletions are held by the deletion budget (%s); see the DeletionHeld events in the region. "+
				"A hold ends when every held object is back on management, or when released: the annotation release-deletion on a copy, "+
				"or release-deletions-before=<RFC 3339 time> on this Region", held, strings.Join(heldKinds, ", ")))
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
