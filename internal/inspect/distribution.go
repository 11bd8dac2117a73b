package inspect

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
)

// Verdicts of ExplainDistribution, per region: the first that applies.
const (
	// DistVerdictDeleting: the Distribution is being deleted; its objects are being removed.
	DistVerdictDeleting = "Deleting"
	// DistVerdictNotReconciled: the hub has not reported on the Distribution yet (no Applied
	// condition): it is not running, or not yet.
	DistVerdictNotReconciled = "NotReconciled"
	// DistVerdictInvalidSpec: the spec cannot be placed; what is placed stays as it is.
	DistVerdictInvalidSpec = "InvalidSpec"
	// DistVerdictNotSelected: the placement does not select the region (the text says by which
	// selector), and nothing of the Distribution is there.
	DistVerdictNotSelected = "NotSelected"
	// DistVerdictRemovalHeld: the region left the placement (or a source went), and the shrink
	// guard holds the removal.
	DistVerdictRemovalHeld = "RemovalHeld"
	// DistVerdictRemoving: the region left the placement; its object is being removed.
	DistVerdictRemoving = "Removing"
	// DistVerdictUnplaceable: selected, but the region cannot take the object (the hub's reason).
	DistVerdictUnplaceable = "Unplaceable"
	// DistVerdictConflict: another object, or an older Distribution, holds the per-region name.
	DistVerdictConflict = "Conflict"
	// DistVerdictFailed: rendering (an override) or writing the object failed for the region.
	DistVerdictFailed = "Failed"
	// DistVerdictHalted: the rollout halted on this region, or halted before reaching it.
	DistVerdictHalted = "Halted"
	// DistVerdictPaused: spec.paused holds the rollout before this region got the update.
	DistVerdictPaused = "Paused"
	// DistVerdictWaitingForWave: a progressive rollout has not reached the region's wave yet.
	DistVerdictWaitingForWave = "WaitingForWave"
	// DistVerdictNotCurrent: placed, but the region's agent has not copied its generation yet.
	DistVerdictNotCurrent = "NotCurrent"
	// DistVerdictNotHealthy: placed and current, but the copy's health is not Current.
	DistVerdictNotHealthy = "NotHealthy"
	// DistVerdictPlaced: placed, current and healthy.
	DistVerdictPlaced = "Placed"
)

// DistributionInput is what ExplainDistribution judges: what ReadDistributionInput read, or a
// test's fixture.
type DistributionInput struct {
	// Keys are the hub's keys (its annotation domain).
	Keys shard.Keys
	// Distribution is the Distribution on management.
	Distribution *regionsyncv1alpha1.Distribution
	// Regions are every Region.
	Regions []regionsyncv1alpha1.Region
	// Objects are the Distribution's per-region objects (labelled D/distribution), of the kind
	// it places.
	Objects []unstructured.Unstructured
	// Events regarding the Distribution, oldest first.
	Events []EventLine
	// Region, when set, is the one region to explain.
	Region string
}

// RegionVerdict is one region's verdict on a Distribution.
type RegionVerdict struct {
	Region  string `json:"region"`
	Verdict string `json:"verdict"`
	// Objects are the region's per-region objects; Revision the revision they carry.
	Objects  []string `json:"objects,omitempty"`
	Revision string   `json:"revision,omitempty"`
	// Wave is the region's wave in a progressive rollout (from 1; 0: none), WaveName its name.
	Wave     int    `json:"wave,omitempty"`
	WaveName string `json:"waveName,omitempty"`
	// Text says why, naming the selector, the reason, the wave or the message.
	Text string `json:"text"`
}

// DistributionExplanation is ExplainDistribution's answer.
type DistributionExplanation struct {
	// Distribution is "namespace/name".
	Distribution string `json:"distribution"`
	// Summary says where it is placed and how the rollout stands, in a sentence.
	Summary string `json:"summary"`
	// Regions are the verdicts: every region selected or holding an object (or the one asked).
	Regions []RegionVerdict `json:"regions"`
	// NotSelected counts the other Regions, which the placement does not select.
	NotSelected int `json:"notSelected,omitempty"`
	// Events regarding the Distribution.
	Events []EventLine `json:"events,omitempty"`
}

// ReadDistributionInput reads what ExplainDistribution needs, a bounded number of requests
// whatever the number of regions: the Distribution, the Regions, one list of its per-region
// objects (by its label) and its Events.
func ReadDistributionInput(ctx context.Context, c *Clients, keys shard.Keys, namespace, name, region string) (DistributionInput, error) {
	in := DistributionInput{Keys: keys, Region: region}
	ref := namespace + "/" + name
	u, err := c.Dynamic.Resource(regionsyncv1alpha1.GroupVersion.WithResource("distributions")).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return in, fmt.Errorf("reading Distribution %s on management: %w", ref, err)
	}
	in.Distribution = &regionsyncv1alpha1.Distribution{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, in.Distribution); err != nil {
		return in, fmt.Errorf("decoding Distribution %s: %w", ref, err)
	}
	rl, err := c.Dynamic.Resource(regionsyncv1alpha1.GroupVersion.WithResource("regions")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("listing Regions: %w", err)
	}
	for i := range rl.Items {
		var r regionsyncv1alpha1.Region
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(rl.Items[i].Object, &r); err != nil {
			return in, fmt.Errorf("decoding Region %s: %w", rl.Items[i].GetName(), err)
		}
		in.Regions = append(in.Regions, r)
	}
	if pk := in.Distribution.Status.PlacedKind; pk != "" && c.Mapper != nil {
		i := strings.LastIndex(pk, "/")
		gvk := schema.FromAPIVersionAndKind(pk[:i], pk[i+1:])
		m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return in, fmt.Errorf("kind %s that Distribution %s places: %w", pk, ref, err)
		}
		list, err := c.Dynamic.Resource(m.Resource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: keys.Distribution + "=" + name})
		if err != nil && !apierrors.IsForbidden(err) {
			return in, fmt.Errorf("listing the per-region objects of Distribution %s: %w", ref, err)
		}
		if err == nil {
			in.Objects = list.Items
		}
	}
	if in.Events, err = eventsAbout(ctx, c, namespace, "Distribution", name); err != nil {
		return in, fmt.Errorf("listing the Events of Distribution %s: %w", ref, err)
	}
	return in, nil
}

// ExplainDistribution says, for each region (or the one asked), why the Distribution is or is
// not there, from its status (which lists every region needing attention), its rollout, its
// placement judged by the hub's own selection and waves, and its per-region objects.
func ExplainDistribution(in DistributionInput) *DistributionExplanation {
	d := in.Distribution
	st := d.Status
	e := &DistributionExplanation{Distribution: d.Namespace + "/" + d.Name, Events: in.Events}
	byRegion := map[string]*regionsyncv1alpha1.Region{}
	for i := range in.Regions {
		byRegion[in.Regions[i].Name] = &in.Regions[i]
	}
	entries := map[string]regionsyncv1alpha1.DistributionRegionStatus{}
	for _, en := range st.Regions {
		entries[en.Region] = en
	}
	objects := map[string][]*unstructured.Unstructured{}
	for i := range in.Objects {
		o := &in.Objects[i]
		r := o.GetLabels()[regionsyncv1alpha1.RegionLabel]
		objects[r] = append(objects[r], o)
	}
	selected, selErr := hub.Selected(d.Spec.Placement, in.Regions)
	applied := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionApplied)
	invalid := ""
	switch {
	case selErr != nil:
		invalid = selErr.Error()
	case applied != nil && applied.Status == metav1.ConditionFalse && applied.Reason == regionsyncv1alpha1.ReasonInvalidSpec:
		invalid = applied.Message
	}
	waveOf, waves := distributionWaves(d, selected, byRegion, entries)
	names := map[string]bool{}
	for _, n := range selected {
		names[n] = true
	}
	for n := range entries {
		names[n] = true
	}
	for n := range objects {
		names[n] = true
	}
	if in.Region != "" {
		names = map[string]bool{in.Region: true}
	}
	j := distJudge{d: d, keys: in.Keys, invalid: invalid, waveOf: waveOf, waves: waves, byRegion: byRegion}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		en, listed := entries[name]
		v := j.judge(name, slices.Contains(selected, name), en, listed, objects[name])
		e.Regions = append(e.Regions, v)
	}
	if in.Region == "" {
		for _, r := range in.Regions {
			if !names[r.Name] {
				e.NotSelected++
			}
		}
	}
	e.Summary = distributionSummary(d, len(selected), invalid, waves)
	return e
}

// distJudge holds what every region's verdict is judged against.
type distJudge struct {
	d        *regionsyncv1alpha1.Distribution
	keys     shard.Keys
	invalid  string
	waveOf   map[string]int
	waves    []hub.Wave
	byRegion map[string]*regionsyncv1alpha1.Region
}

// judge is one region's verdict: selected by the placement, its status entry (listed: there is
// one; a region not listed is current and ready, the status omits such regions past 100) and
// its per-region objects.
func (j *distJudge) judge(region string, selected bool, en regionsyncv1alpha1.DistributionRegionStatus, listed bool, objs []*unstructured.Unstructured) RegionVerdict {
	d := j.d
	v := RegionVerdict{Region: region}
	for _, o := range objs {
		v.Objects = append(v.Objects, o.GetName())
		if rev := o.GetAnnotations()[j.keys.Revision]; rev != "" {
			v.Revision = rev
		}
	}
	if i, ok := j.waveOf[region]; ok {
		v.Wave, v.WaveName = i+1, j.waves[i].Name
	}
	set := func(verdict, format string, args ...any) RegionVerdict {
		v.Verdict, v.Text = verdict, fmt.Sprintf(format, args...)
		return v
	}
	switch {
	case d.DeletionTimestamp != nil:
		return set(DistVerdictDeleting, "the Distribution is being deleted (deletionPolicy %s)%s", cmp.Or(string(d.Spec.DeletionPolicy), "Delete"), entryText(en, listed))
	case meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionApplied) == nil && j.invalid == "":
		return set(DistVerdictNotReconciled, "the hub has not reported on this Distribution yet: is it running? (kubectl -n regionsync-system get deployment regionsync-hub)")
	case j.invalid != "":
		return set(DistVerdictInvalidSpec, "the spec cannot be placed, so nothing placed is changed: %s", j.invalid)
	}
	if listed {
		switch en.State {
		case regionsyncv1alpha1.PlacementRemovalHeld:
			return set(DistVerdictRemovalHeld, "%s", en.Message)
		case regionsyncv1alpha1.PlacementRemoving, regionsyncv1alpha1.PlacementWaitingForRegion:
			return set(DistVerdictRemoving, "left the placement; its object is being removed%s", entryText(en, listed))
		}
	}
	if !selected {
		if len(objs) > 0 {
			return set(DistVerdictRemoving, "left the placement; the hub removes its object")
		}
		return set(DistVerdictNotSelected, "%s", notSelectedText(d.Spec.Placement, j.byRegion[region], region))
	}
	if listed {
		switch en.State {
		case regionsyncv1alpha1.PlacementUnplaceable:
			return set(DistVerdictUnplaceable, "%s: %s", en.Reason, en.Message)
		case regionsyncv1alpha1.PlacementConflict:
			return set(DistVerdictConflict, "%s", en.Message)
		case regionsyncv1alpha1.PlacementFailed:
			return set(DistVerdictFailed, "%s: %s", en.Reason, en.Message)
		}
	}
	if verdict, text := j.rolloutVerdict(region, v, en, listed); verdict != "" {
		return set(verdict, "%s", text)
	}
	if !listed {
		return set(DistVerdictPlaced, "current and healthy (the status lists only the regions that need attention past %d)", regionsyncv1alpha1.MaxStatusRegions)
	}
	switch {
	case !en.Current:
		return set(DistVerdictNotCurrent, "%s generation %d is placed; the region's agent has not copied it yet (explain the object with --region-context to see why)", en.Name, en.Generation)
	case en.Health != "Current":
		return set(DistVerdictNotHealthy, "%s is current; its health is %s%s", en.Name, cmp.Or(en.Health, "Unknown"), messageText(en.Message))
	}
	return set(DistVerdictPlaced, "%s is current and healthy", en.Name)
}

// rolloutVerdict is the verdict of a placed region from the rollout ("" when the rollout does not
// decide it): halted on it or before it, paused before it, waiting for its wave.
func (j *distJudge) rolloutVerdict(region string, v RegionVerdict, en regionsyncv1alpha1.DistributionRegionStatus, listed bool) (string, string) {
	d, rollout := j.d, j.d.Status.Rollout
	verdict := func(verdict, format string, args ...any) (string, string) {
		return verdict, fmt.Sprintf(format, args...)
	}
	if rollout != nil && rollout.Halt != nil {
		h := rollout.Halt
		switch {
		case slices.Contains(h.Regions, region):
			what := "halted"
			if h.RolledBack {
				what = "halted and rolled back to " + cmp.Or(rollout.CurrentRevision, "the previous revision")
			}
			return verdict(DistVerdictHalted, "the rollout of revision %s %s on this region since %s: %s: %s", h.Revision, what, h.Since.UTC().Format(time.RFC3339), h.Reason, h.Message)
		case v.Revision != h.Revision && v.Revision != rollout.UpdateRevision:
			return verdict(DistVerdictHalted, "keeps revision %s: the rollout of revision %s halted (%s, on %s) before reaching it", cmp.Or(v.Revision, "none"), h.Revision, h.Reason, strings.Join(h.Regions, ", "))
		}
	}
	if rollout != nil && rollout.UpdateRevision != "" && v.Revision != rollout.UpdateRevision {
		if d.Spec.Paused {
			return verdict(DistVerdictPaused, "spec.paused holds the rollout of revision %s before this region (it keeps %s)", rollout.UpdateRevision, cmp.Or(v.Revision, "nothing"))
		}
		if (listed && en.State == regionsyncv1alpha1.PlacementPending) || len(j.waves) > 0 {
			return verdict(DistVerdictWaitingForWave, "waits for its wave (%d of %d, %s) to get revision %s; the rollout is in wave %d (%s)%s",
				v.Wave, len(j.waves), cmp.Or(v.WaveName, "-"), rollout.UpdateRevision, rollout.Wave, cmp.Or(rollout.WaveName, "-"), keepsText(v.Revision))
		}
	}
	return "", ""
}

// distributionWaves assigns the waves of a progressive rollout as the hub does, over the
// selected Regions that are placeable (not listed Unplaceable).
func distributionWaves(d *regionsyncv1alpha1.Distribution, selected []string, byRegion map[string]*regionsyncv1alpha1.Region,
	entries map[string]regionsyncv1alpha1.DistributionRegionStatus,
) (map[string]int, []hub.Wave) {
	if d.Spec.Strategy.Type != regionsyncv1alpha1.RolloutProgressive {
		return nil, nil
	}
	var views []hub.RegionView
	for _, name := range selected {
		r := byRegion[name]
		if r == nil || entries[name].State == regionsyncv1alpha1.PlacementUnplaceable {
			continue
		}
		views = append(views, hub.RegionView{Name: name, Labels: r.Labels})
	}
	waves, err := hub.AssignWaves(d.Spec.Strategy, views)
	if err != nil {
		return nil, nil
	}
	out := map[string]int{}
	for i, w := range waves {
		for _, r := range w.Regions {
			out[r] = i
		}
	}
	return out, waves
}

// notSelectedText says which part of the placement does not select region.
func notSelectedText(p regionsyncv1alpha1.Placement, r *regionsyncv1alpha1.Region, region string) string {
	if r == nil {
		return fmt.Sprintf("no Region %s exists, and spec.placement.regions does not name it", region)
	}
	named := "spec.placement.regions does not name it"
	if len(p.Regions) == 0 {
		named = "spec.placement.regions names no region"
	}
	if p.RegionSelector == nil {
		return named + ", and spec.placement has no regionSelector"
	}
	sel, err := metav1.LabelSelectorAsSelector(p.RegionSelector)
	if err != nil {
		return named + ", and spec.placement.regionSelector does not parse: " + err.Error()
	}
	return fmt.Sprintf("%s, and its labels %s do not match spec.placement.regionSelector %q", named, formatLabels(r.Labels), sel.String())
}

// distributionSummary says where the Distribution is placed and how its rollout stands.
func distributionSummary(d *regionsyncv1alpha1.Distribution, selected int, invalid string, waves []hub.Wave) string {
	c := d.Status.Counts
	if invalid != "" {
		return "the spec cannot be placed (nothing placed is changed): " + invalid
	}
	s := fmt.Sprintf("selects %d region(s): %d placed, %d current, %d ready", selected, c.Placed, c.Current, c.Ready)
	if d.Status.ObservedGeneration != 0 && d.Status.ObservedGeneration < d.Generation {
		s += fmt.Sprintf(" (the hub's status is of generation %d; the spec is at %d)", d.Status.ObservedGeneration, d.Generation)
	}
	if c.Unplaceable+c.Failed+c.Removing > 0 {
		s += fmt.Sprintf(", %d unplaceable, %d failed, %d removing", c.Unplaceable, c.Failed, c.Removing)
	}
	if r := d.Status.Rollout; r != nil {
		switch {
		case r.Halt != nil:
			s += fmt.Sprintf("; the rollout of revision %s halted (%s)", r.Halt.Revision, r.Halt.Reason)
		case r.Wave > 0:
			s += fmt.Sprintf("; rolling out revision %s: wave %d of %d (%s), %d updated, %d healthy", r.UpdateRevision, r.Wave, r.Waves, cmp.Or(r.WaveName, "-"), r.Updated, r.Healthy)
		case r.UpdateRevision != "":
			s += "; revision " + r.UpdateRevision
		}
	}
	if len(waves) > 0 && (d.Status.Rollout == nil || d.Status.Rollout.Wave == 0) {
		s += fmt.Sprintf("; Progressive in %d waves", len(waves))
	}
	return s
}

func entryText(en regionsyncv1alpha1.DistributionRegionStatus, listed bool) string {
	if !listed || en.Message == "" {
		return ""
	}
	return ": " + en.Message
}

func messageText(m string) string {
	if m == "" {
		return ""
	}
	return " (" + m + ")"
}

func keepsText(rev string) string {
	if rev == "" {
		return "; nothing is placed there yet"
	}
	return "; it keeps " + rev
}

// WriteDistributionExplanation writes a DistributionExplanation as kubectl regionsync explain
// prints it: the summary, a table of the regions' verdicts, and the last events.
func WriteDistributionExplanation(w io.Writer, e *DistributionExplanation, events int, now time.Time) error {
	fmt.Fprintf(w, "Distribution %s: %s\n\n", e.Distribution, e.Summary)
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "REGION\tVERDICT\tWAVE\tREVISION\tWHY")
	for _, r := range e.Regions {
		wave := "-"
		if r.Wave > 0 {
			wave = fmt.Sprintf("%d %s", r.Wave, r.WaveName)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Region, r.Verdict, wave, orDash(r.Revision), r.Text)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if e.NotSelected > 0 {
		fmt.Fprintf(w, "%d other Region(s) not selected (--region <name> says why)\n", e.NotSelected)
	}
	if len(e.Events) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nEvents:")
	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tMESSAGE")
	list := e.Events
	if events >= 0 && len(list) > events {
		list = list[len(list)-events:]
	}
	for _, l := range list {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", since(now, l.Time), l.Type, l.Reason, strings.ReplaceAll(l.Message, "\n", " "))
	}
	return tw.Flush()
}
