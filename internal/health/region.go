// Package health is a region's health: the agent's liveness and readiness probes, the Region
// status on the management cluster (written by the leader while it holds the region's shard
// Lease) and the local cluster ID that identifies the fleet.
package health

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/fleetspec"
	"github.com/regionsync/regionsync/internal/retry"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// ClusterID returns the UID of the cluster's kube-system namespace, the conventional cluster ID.
func ClusterID(ctx context.Context, c client.Reader) (string, error) {
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
		return "", fmt.Errorf("reading the local cluster ID (namespace kube-system): %w", err)
	}
	return string(ns.UID), nil
}

// KubernetesVersion returns the version a cluster's API server reports (its /version), as the
// Region states it: the gitVersion of a release (v1.36.3). A server built from source without
// release metadata reports gitVersion v0.0.0-master (or another v0.0.0-*): then the binary's
// own major.minor (v1.36) when the server states it (major/minor, else the emulation version),
// else the gitVersion as it is.
func KubernetesVersion(info *version.Info) string {
	if info == nil {
		return ""
	}
	if !strings.HasPrefix(info.GitVersion, "v0.0.0") {
		return info.GitVersion
	}
	for _, mm := range [][2]string{{info.Major, info.Minor}, {info.EmulationMajor, info.EmulationMinor}} {
		major, minor := mm[0], strings.TrimSuffix(mm[1], "+")
		if major != "" && minor != "" && major != "0" {
			return "v" + major + "." + minor
		}
	}
	return info.GitVersion
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
	// CredentialExpiry is when the management credential in use expires (zero when unknown);
	// nil reports none.
	CredentialExpiry func() time.Time
	// ClusterProperties are the regional cluster's ClusterProperty objects (PropertyReader);
	// nil reports none.
	ClusterProperties func() []regionsyncv1alpha1.ClusterProperty
}

// Reporter keeps the status of the Region named after the agent's region current. It writes only
// when the status changed (at most every MinInterval), and, only when Refresh is set, rewrites
// the heartbeat time that often when nothing changed: by default an idle region's one periodic
// write to management is its shard Lease's renewal, which is its heartbeat. It never creates the
// Region: the operator does when adding the region.
type Reporter struct {
	// Client reads, watches and writes Regions on management (directly, not cached).
	Client client.WithWatch
	Region string

	Leader, ClusterID, AgentVersion, Shard string
	// KubernetesVersion is the regional API server's version (KubernetesVersion).
	KubernetesVersion string
	Sources           Sources

	MinInterval time.Duration // default 2s
	// Refresh, when positive, rewrites status.heartbeatTime this often when nothing changed;
	// 0 (the default) writes only changes.
	Refresh time.Duration
	// Recheck is how often a missing Region kind is looked for again (default Refresh when set,
	// else fleetspec.DefaultRegionRecheck).
	Recheck time.Duration
	// FirstPassGrace is how long after it starts the reporter waits for the first pass over the
	// shard before its first write (default 2m) when the Region already says this shard is
	// Ready and Synced, while the claim is syncing or still being taken: an agent restarting
	// over a shard in sync then publishes a status equal to the one on the Region, and writes
	// nothing, instead of Synced=False for the seconds of its first pass and then Synced=True
	// again (two management writes per region when a whole fleet restarts). A new region (no
	// such status yet) is reported at once, and so is a refused claim (another fleet, an
	// overlap).
	FirstPassGrace time.Duration
	Log            logr.Logger

	// lastWritten is the status as last written or found current; lastWrite when the agent last
	// wrote; lastBeat the heartbeat on the Region.
	lastWritten *regionsyncv1alpha1.RegionStatus
	lastWrite   time.Time
	lastBeat    time.Time
	missing     bool
	// notBefore delays the next look for a Region that does not exist, or whose kind is not
	// installed (one read per Refresh).
	notBefore time.Time
	// begun is when Run started; firstPass that the first pass was seen done.
	begun     time.Time
	firstPass bool
	// seen is the Region's status as the watch last delivered it (nil: none yet, or no Region).
	seen atomic.Pointer[regionsyncv1alpha1.RegionStatus]
	// watched: the watch delivered the Region (or its absence) at least once.
	watched atomic.Bool
	// failing names the failure being retried ("" while publishing works), so that a failure
	// is logged once when it starts and once when it ends, not on every tick.
	failing string
}

// Failures of publication, as Reporter.failing records them.
const (
	failNoKind    = "the Region kind is not installed"
	failTransient = "management unreachable or busy"
)

// Run reports until ctx ends. It watches its Region, so a Region created (or changed by another
// writer) is acted on within a tick, without polling management for it.
func (r *Reporter) Run(ctx context.Context) {
	if r.MinInterval == 0 {
		r.MinInterval = 2 * time.Second
	}
	if r.Recheck == 0 {
		r.Recheck = fleetspec.DefaultRegionRecheck
		if r.Refresh > 0 {
			r.Recheck = r.Refresh
		}
	}
	if r.FirstPassGrace == 0 {
		r.FirstPassGrace = 2 * time.Minute
	}
	r.begun, r.firstPass = time.Now(), false
	kick := make(chan struct{}, 1)
	go r.watch(ctx, kick)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		now := time.Now()
		if attempted, err := r.report(ctx, now); attempted && ctx.Err() == nil {
			r.outcome(err, now)
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

// outcome logs and records a publication's result: a failure once when it starts (an expected
// one at info level, a missing Region kind as the one warning saying what to do, anything else,
// a refusal or a bug, as an error each time its message changes), its end once, and every
// retry in between at V(1). The regionsync_region_status_published gauge says the same.
func (r *Reporter) outcome(err error, now time.Time) {
	if err == nil {
		if r.missing { // the Region object does not exist: nothing to publish on (logged once)
			telemetry.RegionStatusPublished.Set(0)
		} else {
			telemetry.RegionStatusPublished.Set(1)
		}
		if r.failing != "" {
			r.Log.Info("publishing the Region status again", "region", r.Region, "after", r.failing)
			r.failing = ""
		}
		return
	}
	telemetry.RegionStatusPublished.Set(0)
	was := r.failing
	switch {
	case meta.IsNoMatchError(err):
		r.failing = failNoKind
		r.notBefore = now.Add(r.Recheck) // looked for again once per Recheck, silently
		if was != failNoKind {
			r.Log.Info("WARNING: the Region kind (regions.regionsync.dev) is not installed on management, so this region's status is not published; "+
				"install its CRD on management (deploy/crds/regionsync.dev_regions.yaml), or turn the Region status off (regionsync.Options.DisableRegionStatus); "+
				"syncing is not affected. Looking for it again periodically.", "region", r.Region, "every", r.Recheck.String())
		}
	case retry.Transient(err):
		r.failing = failTransient
		if was != failTransient {
			r.Log.Info("publishing the Region status failed: management unreachable or busy; retrying (further failures at V(1))", "region", r.Region, "error", err.Error())
		} else {
			r.Log.V(1).Info("publishing the Region status failed; retrying", "error", err.Error())
		}
	default:
		r.failing = err.Error()
		if was != r.failing {
			r.Log.Error(err, "publishing the Region status; retrying", "region", r.Region)
		} else {
			r.Log.V(1).Info("publishing the Region status failed again", "error", err.Error())
		}
	}
}

// watch sends on kick whenever the Region changes (created, deleted, written by anyone), until
// ctx ends; a broken watch is started again.
func (r *Reporter) watch(ctx context.Context, kick chan<- struct{}) {
	for ctx.Err() == nil {
		w, err := r.Client.Watch(ctx, &regionsyncv1alpha1.RegionList{}, client.MatchingFields{"metadata.name": r.Region})
		if err == nil {
			for ev := range w.ResultChan() {
				if region, ok := ev.Object.(*regionsyncv1alpha1.Region); ok {
					if ev.Type == watch.Deleted {
						r.seen.Store(nil)
					} else {
						r.seen.Store(region.Status.DeepCopy())
					}
					r.watched.Store(true)
				}
				select {
				case kick <- struct{}{}:
				default:
				}
			}
			w.Stop()
		} else {
			r.Log.V(1).Info("watching the Region; retrying", "error", err.Error())
		}
		wait := time.Second
		if err != nil && meta.IsNoMatchError(err) {
			wait = r.Recheck // the kind is not installed: look again once per Recheck
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// report writes the status when the agent's part of it changed (rate-limited) or, with Refresh
// set, the heartbeat is due; conditions other writers set are kept and never cause a write.
// attempted says whether it asked management at all (not when rate-limited or nothing is due),
// err how that went.
func (r *Reporter) report(ctx context.Context, now time.Time) (attempted bool, err error) {
	if (!r.lastWrite.IsZero() && now.Sub(r.lastWrite) < r.MinInterval) || now.Before(r.notBefore) || r.awaitingFirstPass(now) {
		return false, nil
	}
	want := r.desired(nil)
	if want.LastSyncTime == nil && r.lastWritten != nil {
		want.LastSyncTime = r.lastWritten.LastSyncTime
	}
	if r.lastWritten != nil && sameOwnStatus(r.lastWritten, &want) && !r.beatDue(r.lastBeat, now) {
		return false, nil
	}
	region := &regionsyncv1alpha1.Region{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Region}, region); err != nil {
		if apierrors.IsNotFound(err) {
			if !r.missing {
				r.Log.Info("Region object does not exist on management; the operator creates it when adding a region (the agent only updates its status)", "region", r.Region)
				r.missing = true
			}
			r.notBefore = now.Add(r.Recheck) // the watch says when it appears
			return true, nil
		}
		return true, err
	}
	r.missing = false
	status := r.desired(region.Status.Conditions)
	current := region.Status.DeepCopy()
	if status.LastSyncTime == nil {
		// Nothing written since this agent started: the last sync is still the one recorded.
		status.LastSyncTime = current.LastSyncTime
	}
	if hb := current.HeartbeatTime; hb != nil && !r.beatDue(hb.Time, now) && sameStatus(current, &status) {
		// Nothing but the heartbeat would change, and it is not due (never, by default).
		r.lastWritten, r.lastBeat = status.DeepCopy(), hb.Time
		return true, nil
	}
	status.HeartbeatTime = &metav1.Time{Time: now}
	region.Status = status
	if err := r.Client.Status().Update(ctx, region, client.FieldOwner(shard.FieldManager)); err != nil {
		return true, fmt.Errorf("updating Region %s status: %w", r.Region, err)
	}
	r.lastWritten, r.lastWrite, r.lastBeat = status.DeepCopy(), now, now
	return true, nil
}

// awaitingFirstPass reports whether the first report still waits for the first pass over the
// shard (see FirstPassGrace).
func (r *Reporter) awaitingFirstPass(now time.Time) bool {
	if r.firstPass || r.Sources.FirstPassDone == nil {
		return false
	}
	if r.Sources.FirstPassDone() {
		r.firstPass = true
		return false
	}
	if now.Sub(r.begun) >= r.FirstPassGrace {
		return false
	}
	if c := r.Sources.Claim(); !c.Syncing && c.Reason != regionsyncv1alpha1.ReasonWaiting {
		return false
	}
	if !r.watched.Load() {
		// The watch has not delivered the Region yet: what it says decides.
		return now.Sub(r.begun) < firstWatchWait
	}
	return r.wasSynced()
}

// firstWatchWait bounds how long the first report waits for the watch's first delivery (a
// Region that does not exist delivers nothing).
const firstWatchWait = 10 * time.Second

// wasSynced reports whether the Region, as last watched, says this shard is Ready and Synced.
func (r *Reporter) wasSynced() bool {
	st := r.seen.Load()
	return st != nil && st.Shard == r.Shard &&
		meta.IsStatusConditionTrue(st.Conditions, regionsyncv1alpha1.ConditionReady) &&
		meta.IsStatusConditionTrue(st.Conditions, regionsyncv1alpha1.ConditionSynced)
}

// beatDue reports whether a heartbeat written at beat is due to be rewritten at now: only with
// Refresh set, once it is that old.
func (r *Reporter) beatDue(beat, now time.Time) bool {
	return r.Refresh > 0 && now.Sub(beat) >= r.Refresh
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
		KubernetesVersion: r.KubernetesVersion,
		Conditions:        append([]metav1.Condition(nil), previous...),
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
	if r.Sources.ClusterProperties != nil {
		st.ClusterProperties = r.Sources.ClusterProperties()
	}
	if r.Sources.CredentialExpiry != nil {
		if e := r.Sources.CredentialExpiry(); !e.IsZero() {
			st.CredentialExpiryTime = &metav1.Time{Time: e.Truncate(time.Second)}
		}
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
