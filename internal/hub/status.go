package hub

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
)

// Observation is what the hub reads off a per-region object on management.
type Observation struct {
	// Generation is the object's metadata.generation.
	Generation int64
	// Current: the region's agent copied this generation down (D/sync-remote-generation) and
	// the uploaded status, where the kind reports status.observedGeneration, is of the copy's
	// generation after that write (D/sync-local-generation): docs/design/sync-rules.md#generation-annotations.
	// For a kind without metadata.generation (ConfigMap): the hash of the content the agent
	// copied (D/sync-applied-hash) is the hash of the object's content now.
	Current bool
	// Health is the copy's kstatus, or the Distribution's health rule's verdict, judged on the
	// uploaded status against the copy's own generation (the management object's generation is
	// another counter).
	Health string
	// HealthError is why the health rule could not judge the copy (naming its field), or "".
	HealthError string
}

// Observe reads the generation annotations, the applied-content hash and the uploaded status of
// a per-region object; rule (nil: kstatus) judges the copy's health.
func Observe(u *unstructured.Unstructured, keys shard.Keys, rule *HealthRule) Observation {
	o := Observation{Generation: u.GetGeneration(), Health: string(kstatus.UnknownStatus)}
	a := u.GetAnnotations()
	if _, fanOut := a[keys.FanOutNamespaces]; fanOut {
		return observeFanOut(u, keys, o)
	}
	local, err := strconv.ParseInt(a[keys.LocalGeneration], 10, 64)
	copied := err == nil && a[keys.RemoteGeneration] == strconv.FormatInt(o.Generation, 10)
	observed, found, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if o.Generation == 0 {
		// No metadata.generation: the generations stay 0, the content hash tells.
		applied := a[keys.AppliedHash]
		o.Current = copied && applied != "" && applied == keys.AppliedContentHash(u)
	} else {
		o.Current = copied && (!found || observed == local)
	}
	if u.GetDeletionTimestamp() != nil {
		o.Health = string(kstatus.TerminatingStatus)
		return o
	}
	if err != nil {
		return o // never synced: nothing is known of the copy
	}
	asCopy := u.DeepCopy()
	asCopy.SetGeneration(local)
	switch {
	case rule == nil:
		if r, err := kstatus.Compute(asCopy); err == nil {
			o.Health = string(r.Status)
		}
	case found && observed != local:
		o.Health = string(kstatus.InProgressStatus) // the copy's controller has not seen its spec yet
	default:
		h, err := rule.Judge(asCopy.Object)
		o.Health = string(h)
		if err != nil {
			o.HealthError = err.Error()
		}
	}
	return o
}

// observeFanOut judges a per-region object that asks for namespace fan-out from the report its
// region's agent writes (no status is uploaded from N copies): current when every matching
// namespace's copy holds the object's content now; health Failed when a namespace's copy failed,
// Current when current, else InProgress (Unknown before the first report).
func observeFanOut(u *unstructured.Unstructured, keys shard.Keys, o Observation) Observation {
	if u.GetDeletionTimestamp() != nil {
		o.Health = string(kstatus.TerminatingStatus)
		return o
	}
	value, ok := u.GetAnnotations()[keys.FanOutReport]
	if !ok {
		return o // not reported yet
	}
	r, err := keys.ParseFanOutReport(value)
	if err != nil {
		o.HealthError = err.Error()
		return o
	}
	o.Current = keys.FanOutCurrent(r, u)
	switch {
	case len(r.Failed) > 0 || r.MoreFailed > 0:
		o.Health = string(kstatus.FailedStatus)
	case o.Current:
		o.Health = string(kstatus.CurrentStatus)
	default:
		o.Health = string(kstatus.InProgressStatus)
	}
	return o
}

// into sets an entry's generation, currentness and health; a health rule's error becomes its
// reason and message.
func (o Observation) into(e *regionsyncv1alpha1.DistributionRegionStatus) {
	e.Generation, e.Current, e.Health = o.Generation, o.Current, o.Health
	if o.HealthError != "" {
		e.Reason, e.Message = regionsyncv1alpha1.ReasonHealthRuleError, o.HealthError
	}
}

// Ready reports whether a region's entry is placed, current and healthy.
func entryReady(e regionsyncv1alpha1.DistributionRegionStatus) bool {
	return e.State == regionsyncv1alpha1.PlacementApplied && e.Current && e.Health == string(kstatus.CurrentStatus)
}

// StatusInput is what a reconcile learned, from which the status is computed.
type StatusInput struct {
	// Entries are every region's state (placed, unplaceable, failed, removing).
	Entries []regionsyncv1alpha1.DistributionRegionStatus
	// Selected is the number of regions the placement selects.
	Selected int
	// InvalidSpec is the spec's error (nothing was rendered), or nil.
	InvalidSpec error
	// Held: the shrink guard holds removals since HeldSince.
	Held      bool
	HeldSince time.Time
	// PlacedKind is the apiVersion/kind of the per-region objects.
	PlacedKind string
	// ConfirmKey is the annotation that confirms held removals (for the message).
	ConfirmKey string
	// InvalidHealthRule is why spec.health does not compile, or nil.
	InvalidHealthRule error
	// Rollout is the rollout phase's outcome (nil: nothing was decided).
	Rollout *RolloutOutcome
	// HeldMessage says what holds the removals (the RemovalHeld message), when Held.
	HeldMessage string
	// Deleting: the Distribution is being deleted (its finalizer removes what it placed).
	Deleting bool
	// NotApplied is a finding that makes Applied False (its reason from conditionReason) although
	// nothing failed, e.g. a source selector that matches nothing.
	NotApplied error
}

// ComputeStatus builds a Distribution's status from a reconcile's findings and the previous
// status (transition times are kept where nothing changed). It is bounded: counts always, at
// most MaxStatusRegions entries (every region while there are that few, else the ones not
// current and ready first).
func ComputeStatus(d *regionsyncv1alpha1.Distribution, in StatusInput, now time.Time) regionsyncv1alpha1.DistributionStatus {
	prev := d.Status
	st := regionsyncv1alpha1.DistributionStatus{
		ObservedGeneration: d.Generation,
		Conditions:         slices.Clone(prev.Conditions),
		PlacedKind:         in.PlacedKind,
	}
	previous := map[string]regionsyncv1alpha1.DistributionRegionStatus{}
	for _, e := range prev.Regions {
		previous[e.Region] = e
	}
	entries := slices.Clone(in.Entries)
	slices.SortFunc(entries, func(a, b regionsyncv1alpha1.DistributionRegionStatus) int { return strings.Compare(a.Region, b.Region) })
	var failed, unplaceable, unhealthy, ruleErrors []string
	st.Counts.Selected = int32(in.Selected)
	for i := range entries {
		e := &entries[i]
		if p, ok := previous[e.Region]; ok && p.State == e.State && p.Current == e.Current && p.Health == e.Health && p.LastTransitionTime != nil {
			e.LastTransitionTime = p.LastTransitionTime
		} else {
			e.LastTransitionTime = &metav1.Time{Time: now.Truncate(time.Second)}
		}
		switch e.State {
		case regionsyncv1alpha1.PlacementApplied:
			st.Counts.Placed++
			if e.Current {
				st.Counts.Current++
			}
			if entryReady(*e) {
				st.Counts.Ready++
			}
			if e.Health == string(kstatus.FailedStatus) {
				unhealthy = append(unhealthy, e.Region)
			}
			if e.Reason == regionsyncv1alpha1.ReasonHealthRuleError {
				ruleErrors = append(ruleErrors, e.Region+": "+e.Message)
			}
		case regionsyncv1alpha1.PlacementUnplaceable:
			st.Counts.Unplaceable++
			unplaceable = append(unplaceable, e.Region+" ("+e.Reason+")")
		case regionsyncv1alpha1.PlacementPending:
			// waits for its wave: nothing written yet
		case regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.PlacementConflict:
			st.Counts.Failed++
			failed = append(failed, e.Region+": "+e.Message)
		default:
			st.Counts.Removing++
		}
	}
	if len(entries) <= regionsyncv1alpha1.MaxStatusRegions {
		st.Regions = entries
	} else {
		for _, e := range entries {
			if !entryReady(e) && len(st.Regions) < regionsyncv1alpha1.MaxStatusRegions {
				st.Regions = append(st.Regions, e)
			}
		}
	}
	st.RegionsOmitted = int32(len(entries) - len(st.Regions))

	setConditions(&st, d.Generation, in, entries, findings{failed: failed, unplaceable: unplaceable, unhealthy: unhealthy, ruleErrors: ruleErrors})
	return st
}

// findings are the regions, by what is wrong with them, each "region: why" or "region (why)".
type findings struct {
	failed, unplaceable, unhealthy, ruleErrors []string
}

// setConditions sets Applied, Available, Degraded and RemovalHeld from the counts and findings.
func setConditions(st *regionsyncv1alpha1.DistributionStatus, generation int64, in StatusInput, entries []regionsyncv1alpha1.DistributionRegionStatus, f findings) {
	failed, unplaceable, unhealthy := f.failed, f.unplaceable, f.unhealthy
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: generation})
	}
	c := st.Counts
	switch {
	case in.InvalidSpec != nil:
		set(regionsyncv1alpha1.DistributionApplied, false, conditionReason(in.InvalidSpec, regionsyncv1alpha1.ReasonInvalidSpec), in.InvalidSpec.Error()+"; nothing placed was changed")
	case len(failed) > 0:
		reason := regionsyncv1alpha1.ReasonApplyFailed
		if slices.ContainsFunc(entries, func(e regionsyncv1alpha1.DistributionRegionStatus) bool {
			return e.State == regionsyncv1alpha1.PlacementConflict
		}) {
			reason = regionsyncv1alpha1.ReasonConflict
		}
		set(regionsyncv1alpha1.DistributionApplied, false, reason, fmt.Sprintf("%d of %d regions failed: %s", len(failed), c.Selected, summary(failed)))
	case in.NotApplied != nil:
		set(regionsyncv1alpha1.DistributionApplied, false, conditionReason(in.NotApplied, regionsyncv1alpha1.ReasonInvalidSpec), in.NotApplied.Error())
	case in.Deleting && in.Held:
		set(regionsyncv1alpha1.DistributionApplied, false, regionsyncv1alpha1.ReasonHeld, fmt.Sprintf(
			"the Distribution is being deleted; removing its %d per-region objects is held by the shrink guard (see RemovalHeld)", c.Removing))
	case in.Deleting:
		set(regionsyncv1alpha1.DistributionApplied, false, regionsyncv1alpha1.ReasonDeleting, fmt.Sprintf("the Distribution is being deleted; %d per-region objects left to remove", c.Removing))
	case in.Held:
		// Not done: what should be gone is still placed (a placement that selects no region
		// reads as finished otherwise).
		set(regionsyncv1alpha1.DistributionApplied, false, regionsyncv1alpha1.ReasonHeld, fmt.Sprintf(
			"%s; removing %d per-region objects is held by the shrink guard (see RemovalHeld)", placedMessage(c), heldCount(entries)))
	case c.Selected == 0:
		set(regionsyncv1alpha1.DistributionApplied, true, regionsyncv1alpha1.ReasonNoRegions, "the placement selects no region")
	default:
		set(regionsyncv1alpha1.DistributionApplied, true, regionsyncv1alpha1.ReasonApplied, placedMessage(c))
	}
	switch {
	case c.Placed > 0 && c.Ready == c.Placed:
		set(regionsyncv1alpha1.DistributionAvailable, true, regionsyncv1alpha1.ReasonAvailable, fmt.Sprintf("%d regions current and ready", c.Ready))
	case c.Placed == 0:
		set(regionsyncv1alpha1.DistributionAvailable, false, regionsyncv1alpha1.ReasonNoRegions, "placed in no region")
	case in.InvalidHealthRule != nil:
		set(regionsyncv1alpha1.DistributionAvailable, false, regionsyncv1alpha1.ReasonInvalidHealthRule, fmt.Sprintf("%d of %d placed regions current; no health is known: %v", c.Current, c.Placed, in.InvalidHealthRule))
	default:
		set(regionsyncv1alpha1.DistributionAvailable, false, regionsyncv1alpha1.ReasonProgressing, fmt.Sprintf("%d of %d placed regions current, %d ready", c.Current, c.Placed, c.Ready))
	}
	switch {
	case in.InvalidSpec != nil:
		set(regionsyncv1alpha1.DistributionDegraded, true, conditionReason(in.InvalidSpec, regionsyncv1alpha1.ReasonInvalidSpec), in.InvalidSpec.Error())
	case in.InvalidHealthRule != nil:
		set(regionsyncv1alpha1.DistributionDegraded, true, regionsyncv1alpha1.ReasonInvalidHealthRule, in.InvalidHealthRule.Error()+"; every copy's health is Unknown")
	case len(failed) > 0:
		set(regionsyncv1alpha1.DistributionDegraded, true, regionsyncv1alpha1.ReasonApplyFailed, summary(failed))
	case len(unplaceable) > 0:
		set(regionsyncv1alpha1.DistributionDegraded, true, regionsyncv1alpha1.ReasonUnplaceable, "unplaceable: "+summary(unplaceable))
	case len(f.ruleErrors) > 0:
		set(regionsyncv1alpha1.DistributionDegraded, true, regionsyncv1alpha1.ReasonHealthRuleError, "the health rule failed in: "+summary(f.ruleErrors))
	case len(unhealthy) > 0:
		set(regionsyncv1alpha1.DistributionDegraded, true, regionsyncv1alpha1.ReasonUnhealthy, "copies failed in: "+summary(unhealthy))
	default:
		set(regionsyncv1alpha1.DistributionDegraded, false, regionsyncv1alpha1.ReasonAsExpected, "nothing is degraded")
	}
	if in.Held {
		set(regionsyncv1alpha1.DistributionRemovalHeld, true, regionsyncv1alpha1.ReasonHeld, in.HeldMessage)
	} else if meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionRemovalHeld) != nil {
		set(regionsyncv1alpha1.DistributionRemovalHeld, false, regionsyncv1alpha1.ReasonNotHeld, "no removal is held")
	}
}

// placedMessage says where the placement stands (the Applied message's start).
func placedMessage(c regionsyncv1alpha1.DistributionCounts) string {
	if c.Selected == 0 {
		return "the placement selects no region"
	}
	return fmt.Sprintf("written for %d of %d selected regions", c.Placed, c.Selected)
}

// heldCount is the number of entries whose removal the shrink guard holds.
func heldCount(entries []regionsyncv1alpha1.DistributionRegionStatus) int {
	n := 0
	for _, e := range entries {
		if e.State == regionsyncv1alpha1.PlacementRemovalHeld {
			n++
		}
	}
	return n
}

// summary lists at most 5 items, then how many more.
func summary(items []string) string {
	if len(items) <= 5 {
		return strings.Join(items, "; ")
	}
	return strings.Join(items[:5], "; ") + fmt.Sprintf("; and %d more", len(items)-5)
}

// statusChanged reports whether a new status differs from the old one (every field, transition
// times included: they change only with what they time).
func statusChanged(old, updated *regionsyncv1alpha1.DistributionStatus) bool {
	return !equality.Semantic.DeepEqual(old, updated)
}
