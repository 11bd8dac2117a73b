package hub

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/internal/telemetry"
)

// Event reasons of rollouts (on Distributions).
const (
	EventWaveStarted     = "WaveStarted"
	EventWaveCompleted   = "WaveCompleted"
	EventRolloutComplete = "RolloutComplete"
	EventRolloutHalted   = "RolloutHalted"
	EventRolledBack      = "RolledBack"
	EventRolloutRetried  = "RolloutRetried"
	eventActionRollout   = "Rollout"
)

// Rollout metrics (bounded labels: no Distribution or region name).
var (
	// RolloutWaves counts waves started and completed.
	RolloutWaves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_hub_rollout_waves_total",
		Help: "Waves of progressive rollouts, by phase (started, completed).",
	}, []string{"phase"})
	// RolloutHalts counts halted rollouts, by action (Halt, Rollback).
	RolloutHalts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regionsync_hub_rollout_halts_total",
		Help: "Progressive rollouts that halted themselves, by onFailure action (Halt, Rollback).",
	}, []string{"action"})
)

func rolloutCollectors() []prometheus.Collector {
	return []prometheus.Collector{RolloutWaves, RolloutHalts}
}

// RolloutOutcome is what the rollout phase adds to a reconcile's findings.
type RolloutOutcome struct {
	// Status is status.rollout.
	Status regionsyncv1alpha1.RolloutStatus
	// Progressing and Halted are the conditions.
	Progressing, Halted Condition
	// RequeueAfter is when to look again with nothing changing (a soak or deadline ending).
	RequeueAfter time.Duration
}

// RegionHealthy is the one judgement of "this region's copy is current and healthy" a rollout
// gates on: the status' own (placed, current by the generation annotations, health Current).
func RegionHealthy(e regionsyncv1alpha1.DistributionRegionStatus) bool {
	return entryReady(e)
}

// RegionLive reports whether a Region's heartbeat holds: its agent reported Ready (True or
// False), and the hub has not marked it Unknown (HeartbeatMissed).
func RegionLive(region *regionsyncv1alpha1.Region) bool {
	c := meta.FindStatusCondition(region.Status.Conditions, regionsyncv1alpha1.ConditionReady)
	return c != nil && c.Status != metav1.ConditionUnknown
}

// ValidateStrategy checks spec.strategy where the CRD schema cannot (selectors, int or
// percentage values); the error names the field.
func ValidateStrategy(s regionsyncv1alpha1.RolloutStrategy) error {
	if _, err := AssignWaves(s, nil); err != nil {
		return err
	}
	if s.MaxConcurrency != nil {
		if _, err := AssignWaves(regionsyncv1alpha1.RolloutStrategy{MaxConcurrency: s.MaxConcurrency}, []RegionView{{Name: "x"}}); err != nil {
			return err
		}
	}
	_, err := MaxFailures(s, 1)
	return err
}

// rolloutTargets is the rollout phase of deploy: it stores the revision of what d places now
// (its template, or its source objects as placed: items, all of kind gvk), decides with
// DecideRollout which revision every placeable region gets, records a halt before anything is
// written, posts the rollout's Events, and renders each region's objects from its revision,
// marked with D/revision (and, for the regions of a wave that starts, the wave's trace context
// in D/traceparent). existing are d's per-region objects of kind gvk, by name.
func (r *DistributionReconciler) rolloutTargets(ctx context.Context, d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, items []*Template, selected []string, regions []regionsyncv1alpha1.Region, existing map[string]*unstructured.Unstructured) ([]Target, *RolloutOutcome, error) {
	have, err := r.revisions(ctx, d)
	if err != nil {
		return nil, nil, err
	}
	content, err := contentOf(d, items)
	var update Revision
	if err == nil {
		update, err = r.ensureRevision(ctx, d, have, content)
	}
	if err != nil {
		return r.unrevisioned(ctx, d, items, selected, regions, err), nil, nil // the rollout's status stays as it was
	}
	var prev *regionsyncv1alpha1.RolloutStatus
	if d.Status.Rollout != nil {
		prev = d.Status.Rollout.DeepCopy()
	}
	prev = r.withWrittenHalt(d, prev)
	stable := r.stableRevision(prev, have, existing, update.Name)
	placed := placeAll(RenderingOf(d), items, selected, regions, r.Keys)
	rule, _ := r.health.get(d.Spec.Health) // compiled once; deploy reports an error
	views := r.regionViews(placed, regions, existing, have, update.Name, rule)
	now := r.Now() // DecideRollout keeps its times rounded up to the second, as the status does
	plan, err := DecideRollout(RolloutInput{
		Strategy: d.Spec.Strategy, Paused: d.Spec.Paused, Update: update.Name, Stable: stable,
		Stored: func(rev string) bool { h, ok := have[rev]; return ok && !h.Content.Redacted }, Previous: prev,
		RetryAfter: retryAfter(d, r.Keys.RetryRollout), Regions: views, Now: now, RetryKey: r.Keys.RetryRollout,
	})
	if err != nil {
		return nil, nil, err
	}
	out := &RolloutOutcome{Status: plan.Status, Progressing: plan.Progressing, Halted: plan.Halted, RequeueAfter: plan.RequeueAfter}
	if plan.NewHalt {
		// The halt is written before any rollback: a hub taking over from here reads it and
		// never applies the halted revision again by itself.
		orig := d.DeepCopy()
		setRolloutStatus(&d.Status, d, out)
		if err := r.Client.Status().Patch(ctx, d, client.MergeFrom(orig), client.FieldOwner(FieldManager)); err != nil {
			return nil, nil, fmt.Errorf("recording the halt of Distribution %s: %w", client.ObjectKeyFromObject(d), err)
		}
		action := regionsyncv1alpha1.FailureHalt
		if plan.Status.Halt.RolledBack {
			action = regionsyncv1alpha1.FailureRollback
		}
		RolloutHalts.WithLabelValues(string(action)).Inc()
		r.mu.Lock()
		if r.haltsWritten == nil {
			r.haltsWritten = map[types.NamespacedName]writtenHalt{}
		}
		r.haltsWritten[client.ObjectKeyFromObject(d)] = writtenHalt{generation: d.Generation, status: *plan.Status.DeepCopy()}
		r.mu.Unlock()
	}
	r.postRolloutEvents(d, update.Name, plan.Events)

	traceparents := r.waveSpans(ctx, d, update.Name, plan)
	targets := r.renderRevisions(d, gvk, placed, plan.Want, update, have, regions, existing, traceparents)
	inUse := map[string]bool{update.Name: true, plan.Status.CurrentRevision: true}
	if plan.Status.Halt != nil {
		inUse[plan.Status.Halt.Revision] = true
	}
	for _, o := range existing {
		inUse[o.GetAnnotations()[r.Keys.Revision]] = true
	}
	if err := r.pruneRevisions(ctx, d, have, inUse); err != nil {
		return nil, nil, err
	}
	return targets, out, nil
}

// writtenHalt is a halt this hub wrote, and the Distribution generation it halted.
type writtenHalt struct {
	generation int64
	status     regionsyncv1alpha1.RolloutStatus
}

// withWrittenHalt reads its own halt: until the cache shows the status this hub wrote when it
// halted, that status stands in for the cached one, so that a reconcile reading a Distribution
// from before its halt never writes the halted revision again (the rollback's own writes make
// such reconciles likely). It applies while the spec is the one that halted and no retry came
// after the halt.
func (r *DistributionReconciler) withWrittenHalt(d *regionsyncv1alpha1.Distribution, prev *regionsyncv1alpha1.RolloutStatus) *regionsyncv1alpha1.RolloutStatus {
	key := client.ObjectKeyFromObject(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.haltsWritten[key]
	switch {
	case !ok:
		return prev
	case w.generation != d.Generation, retryAfter(d, r.Keys.RetryRollout).After(w.status.Halt.Since.Time),
		prev != nil && prev.Halt != nil && !prev.Halt.Since.Before(&w.status.Halt.Since):
		delete(r.haltsWritten, key) // another spec, a retry, or the cache caught up
		return prev
	}
	return w.status.DeepCopy()
}

// unrevisioned places d when its revision cannot be stored: nothing can be rolled out
// progressively then, so a Progressive Distribution writes nothing new (each region Failed with
// the reason) while All places as before (a namespace the hub may not write to refuses that too,
// and says so per region).
func (r *DistributionReconciler) unrevisioned(ctx context.Context, d *regionsyncv1alpha1.Distribution, items []*Template, selected []string, regions []regionsyncv1alpha1.Region, err error) []Target {
	placed := placeAll(RenderingOf(d), items, selected, regions, r.Keys)
	msg := fmt.Sprintf("%v (the hub keeps a Distribution's revisions in its namespace: the RoleBinding of regionsync-hub-impersonate there allows it)", err)
	if d.Spec.Strategy.Type == regionsyncv1alpha1.RolloutProgressive {
		for i := range placed {
			if placed[i].Object != nil {
				placed[i].Object, placed[i].State, placed[i].Reason, placed[i].Message = nil, regionsyncv1alpha1.PlacementFailed, regionsyncv1alpha1.ReasonApplyFailed, msg
			}
		}
	}
	logr.FromContextOrDiscard(ctx).Error(err, "storing the revision", "distribution", client.ObjectKeyFromObject(d))
	return placed
}

// placeAll places every item (one for a template, one per source object): Place's targets,
// item after item.
func placeAll(rd Rendering, items []*Template, selected []string, regions []regionsyncv1alpha1.Region, keys shard.Keys) []Target {
	out := make([]Target, 0, len(items)*len(selected))
	for _, t := range items {
		out = append(out, Place(rd, t, selected, regions, keys)...)
	}
	return out
}

// stableRevision is the current (stable) revision: the status' when it is still stored; for a
// Distribution whose objects were placed before the hub kept revisions, the spec as it is
// (adopted); else none (the first rollout).
func (r *DistributionReconciler) stableRevision(prev *regionsyncv1alpha1.RolloutStatus, have map[string]Revision, existing map[string]*unstructured.Unstructured, update string) string {
	if prev != nil {
		if _, ok := have[prev.CurrentRevision]; ok {
			return prev.CurrentRevision
		}
		return ""
	}
	for _, o := range existing {
		if o.GetAnnotations()[r.Keys.Revision] == "" {
			return update
		}
	}
	return ""
}

// regionViews is what the rollout decision knows of each placeable region (the unplaceable ones
// are in no wave), sorted by name. A region is placeable when any of d's items (its template, or
// one of its source objects) renders there, or fails to (UpdateFailed); its revision and health
// are judged over all its per-region objects (regionRevision).
func (r *DistributionReconciler) regionViews(placed []Target, regions []regionsyncv1alpha1.Region, existing map[string]*unstructured.Unstructured, have map[string]Revision, update string, rule *HealthRule) []RegionView {
	byName := make(map[string]*regionsyncv1alpha1.Region, len(regions))
	for i := range regions {
		byName[regions[i].Name] = &regions[i]
	}
	type placement struct {
		placeable bool
		failed    []string
		names     []string
	}
	groups := map[string]*placement{}
	for _, tg := range placed {
		g := groups[tg.Region]
		if g == nil {
			g = &placement{}
			groups[tg.Region] = g
		}
		switch {
		case tg.Object != nil:
			g.placeable = true
			g.names = append(g.names, tg.Object.GetName())
		case tg.State == regionsyncv1alpha1.PlacementFailed:
			g.placeable = true
			g.failed = append(g.failed, tg.Message)
		}
	}
	objs := map[string][]*unstructured.Unstructured{}
	for _, name := range slices.Sorted(maps.Keys(existing)) {
		o := existing[name]
		region := o.GetLabels()[regionsyncv1alpha1.RegionLabel]
		objs[region] = append(objs[region], o)
	}
	var views []RegionView
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		g := groups[name]
		if !g.placeable || byName[name] == nil {
			continue // unplaceable: reported as such, never part of a rollout
		}
		v := RegionView{Name: name, Labels: byName[name].Labels, Live: RegionLive(byName[name]), UpdateFailed: strings.Join(g.failed, "; ")}
		v.HasObject = len(objs[name]) > 0
		v.Revision, v.Healthy, v.Failed = regionRevision(objs[name], g.names, have, update, r.Keys, rule)
		views = append(views, v)
	}
	return views
}

// regionRevision judges a region's per-region objects of a Distribution (one for a template,
// one per source object for spec.source) from what is written on them: the revision the region
// is on (the update revision when any object carries it, as the region was given it even if not
// every object is written yet; else the newest stored revision they carry; "" when none carries
// a stored one), whether it is healthy for the update revision (each object the update renders
// there, names, carries it and is current and healthy), and whether an object of its revision
// reports Failed health. Objects the update no longer renders (a source removed, its removal
// held by the shrink guard) neither make nor break the region's health.
func regionRevision(objs []*unstructured.Unstructured, names []string, have map[string]Revision, update string, keys shard.Keys, rule *HealthRule) (rev string, healthy, failed bool) {
	byName := make(map[string]*unstructured.Unstructured, len(objs))
	var newest int64
	for _, o := range objs {
		byName[o.GetName()] = o
		switch or := o.GetAnnotations()[keys.Revision]; {
		case have[or].Name == "":
		case or == update:
			rev, newest = update, math.MaxInt64
		case have[or].Number > newest:
			rev, newest = or, have[or].Number
		}
	}
	for _, o := range objs {
		if o.GetAnnotations()[keys.Revision] == rev && rev != "" && Observe(o, keys, rule).Health == string(kstatus.FailedStatus) {
			failed = true
		}
	}
	healthy = rev == update && len(names) > 0
	for _, n := range names {
		o := byName[n]
		if o == nil || o.GetAnnotations()[keys.Revision] != update || !RegionHealthy(entryFor(o, "", keys, rule)) {
			healthy = false
		}
	}
	return rev, healthy, failed
}

// waveSpans starts and ends one span per wave the plan starts, and returns, per region of those
// waves, the span's traceparent (the regions' syncs join the wave's trace through D/traceparent).
func (r *DistributionReconciler) waveSpans(ctx context.Context, d *regionsyncv1alpha1.Distribution, update string, plan RolloutPlan) map[string]string {
	traceparents := map[string]string{}
	for _, w := range plan.StartedWaves {
		_, span := r.Tracer.Start(ctx, "Distribution.RolloutWave", trace.WithAttributes(
			attribute.String("regionsync.distribution", client.ObjectKeyFromObject(d).String()),
			attribute.String("regionsync.revision", update),
			attribute.Int("regionsync.wave", w.Number), attribute.String("regionsync.wave.name", w.Name),
			attribute.Int("regionsync.wave.regions", len(w.Regions))))
		tp := telemetry.Traceparent(trace.ContextWithSpan(ctx, span))
		span.End()
		for _, region := range w.Regions {
			traceparents[region] = tp
		}
		RolloutWaves.WithLabelValues("started").Inc()
	}
	for _, e := range plan.Events {
		if e.Reason == EventWaveCompleted {
			RolloutWaves.WithLabelValues("completed").Inc()
		}
	}
	return traceparents
}

// renderRevisions renders every placeable region's objects from the revision the plan wants
// for it (the unplaceable regions pass through as Place reported them): the update revision from
// d's items as they are now, another from its ControllerRevision (a source revision holds the
// source objects as they were placed then, whatever the sources hold now). A region waiting for
// its wave gets one Pending target (it keeps every object it has).
func (r *DistributionReconciler) renderRevisions(d *regionsyncv1alpha1.Distribution, gvk schema.GroupVersionKind, placed []Target, want map[string]string, update Revision, have map[string]Revision, regions []regionsyncv1alpha1.Region, existing map[string]*unstructured.Unstructured, traceparents map[string]string) []Target {
	byRevision := map[string][]string{}
	for region, rev := range want {
		if rev != "" && rev != update.Name {
			byRevision[rev] = append(byRevision[rev], region)
		}
	}
	rendered := map[string][]Target{}
	for _, rev := range slices.Sorted(maps.Keys(byRevision)) {
		names := byRevision[rev]
		slices.Sort(names)
		if have[rev].Content.Redacted {
			continue // never rendered from what is stored: the regions keep their objects as they are
		}
		items, err := have[rev].Content.Items(r.Keys)
		if err != nil || slices.ContainsFunc(items, func(t *Template) bool { return t.GVK != gvk }) {
			continue // a revision of another kind is not kept in place: such a change goes to every region at once
		}
		for _, n := range names {
			rendered[n] = nil // a revision without objects (a source that selected nothing) renders none
		}
		for _, tg := range placeAll(have[rev].Content.rendering(d), items, names, regions, r.Keys) {
			if tg.Object != nil {
				markRevision(tg.Object, r.Keys.Revision, rev)
			}
			rendered[tg.Region] = append(rendered[tg.Region], tg)
		}
	}
	var order []string
	byRegion := map[string][]Target{}
	for _, tg := range placed {
		if _, ok := byRegion[tg.Region]; !ok {
			order = append(order, tg.Region)
		}
		byRegion[tg.Region] = append(byRegion[tg.Region], tg)
	}
	pending := func(region, msg string) Target {
		return Target{Region: region, State: regionsyncv1alpha1.PlacementPending, Reason: regionsyncv1alpha1.ReasonWaveInProgress, Message: msg}
	}
	out := make([]Target, 0, len(placed))
	for _, region := range order {
		tgs := byRegion[region]
		rev, decided := want[region]
		switch {
		case !decided:
			out = append(out, tgs...) // unplaceable: as Place said
		case rev == "":
			out = append(out, pending(region, "the first rollout has not reached this region's wave yet"))
		case rev != update.Name && have[rev].Content.Redacted:
			out = append(out, pending(region, "keeps its objects as they are until its wave: revision "+rev+" holds no secret data to render it again"))
		case rev != update.Name:
			if other, ok := rendered[region]; ok {
				if len(other) == 0 {
					other = []Target{pending(region, "revision "+rev+" places no object here; the update reaches this region with its wave")}
				}
				out = append(out, other...)
				continue
			}
			for _, tg := range tgs {
				if tg.Object != nil {
					markRevision(tg.Object, r.Keys.Revision, update.Name)
				}
				out = append(out, tg)
			}
		default:
			for _, tg := range tgs {
				if tg.Object != nil {
					markRevision(tg.Object, r.Keys.Revision, update.Name)
					// The wave's trace context on the objects it changes; kept as written after.
					o, a := existing[tg.Object.GetName()], tg.Object.GetAnnotations()
					tp := traceparents[tg.Region]
					if o != nil && o.GetAnnotations()[r.Keys.Revision] == update.Name {
						tp = o.GetAnnotations()[r.Keys.TraceParent]
					}
					if tp != "" && a[r.Keys.TraceParent] == "" {
						a[r.Keys.TraceParent] = tp
						tg.Object.SetAnnotations(a)
					}
				}
				out = append(out, tg)
			}
		}
	}
	return out
}

// markRevision writes D/revision on a rendered object.
func markRevision(u *unstructured.Unstructured, key, rev string) {
	a := u.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = rev
	u.SetAnnotations(a)
}

// postRolloutEvents posts a decision's Events once each per revision (a decision repeats until
// its status is written).
func (r *DistributionReconciler) postRolloutEvents(d *regionsyncv1alpha1.Distribution, update string, evs []RolloutEvent) {
	key := client.ObjectKeyFromObject(d)
	r.mu.Lock()
	if r.rolloutPosted == nil {
		r.rolloutPosted = map[types.NamespacedName]postedEvents{}
	}
	posted := r.rolloutPosted[key]
	if posted.revision != update {
		posted = postedEvents{revision: update, seen: map[string]bool{}}
	}
	var post []RolloutEvent
	for _, e := range evs {
		k := e.Reason + "\x00" + e.Message
		if !posted.seen[k] {
			posted.seen[k] = true
			post = append(post, e)
		}
	}
	r.rolloutPosted[key] = posted
	r.mu.Unlock()
	for _, e := range post {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(d, nil, typ, e.Reason, eventActionRollout, "%s", e.Message)
	}
}

// postedEvents are the rollout Events posted for one Distribution's update revision.
type postedEvents struct {
	revision string
	seen     map[string]bool
}

// setRolloutStatus writes the rollout's status and its conditions (Progressing, Halted) into a
// new status of d; without an outcome (nothing was decided: an invalid spec, a revision that
// could not be stored) it keeps d's as they are.
func setRolloutStatus(st *regionsyncv1alpha1.DistributionStatus, d *regionsyncv1alpha1.Distribution, out *RolloutOutcome) {
	generation := d.Generation
	if out == nil {
		st.Rollout = d.Status.Rollout.DeepCopy()
		return
	}
	st.Rollout = out.Status.DeepCopy()
	for _, c := range []struct {
		t string
		c Condition
	}{{regionsyncv1alpha1.DistributionProgressing, out.Progressing}, {regionsyncv1alpha1.DistributionHalted, out.Halted}} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: c.t, Status: c.c.Status, Reason: c.c.Reason, Message: c.c.Message, ObservedGeneration: generation})
	}
}

// rolloutMilestone reports whether a new status changes the rollout's course (revisions, wave,
// the wave's soak starting or starting again, halt): such a status is written at once, not held
// back by the status interval, so that a hub taking over continues from it. The soak counts from
// the written WaveHealthyTime: held back, every reconcile until the write would start it anew
// (each wave would last the status interval longer than its soak), and a wave unhealthy for
// less than the interval would keep the soak it had served.
func rolloutMilestone(old, updated *regionsyncv1alpha1.DistributionStatus) bool {
	a, b := old.Rollout, updated.Rollout
	if a == nil || b == nil {
		return a != b
	}
	return a.CurrentRevision != b.CurrentRevision || a.UpdateRevision != b.UpdateRevision || a.Wave != b.Wave ||
		!equality.Semantic.DeepEqual(a.WaveHealthyTime, b.WaveHealthyTime) || !equality.Semantic.DeepEqual(a.Halt, b.Halt)
}

// retryAfter reads D/retry-rollout (zero when absent or not RFC 3339).
func retryAfter(d *regionsyncv1alpha1.Distribution, key string) time.Time {
	t, err := time.Parse(time.RFC3339, d.Annotations[key])
	if err != nil {
		return time.Time{}
	}
	return t
}

// regionLivenessChanged lets through a Region status change that flips its liveness (Ready
// becoming or leaving Unknown): a rollout counts a region down as a failure.
func regionLivenessChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*regionsyncv1alpha1.Region)
			n, ok2 := e.ObjectNew.(*regionsyncv1alpha1.Region)
			return ok1 && ok2 && RegionLive(o) != RegionLive(n)
		},
	}
}
