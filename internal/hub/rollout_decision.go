package hub

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

// Defaults of spec.strategy (the CRD defaults them too; these cover objects written before).
const (
	DefaultSoak             = 60 * time.Second
	DefaultProgressDeadline = 10 * time.Minute
)

// maxHaltRegions bounds status.rollout.halt.regions.
const maxHaltRegions = 20

// RegionView is what the rollout decision knows of one placeable region.
type RegionView struct {
	// Name and Labels of the Region (waves select by them).
	Name   string
	Labels map[string]string
	// Revision is the revision the region's per-region objects carry (D/revision; one object
	// for a template, one per source object for spec.source: regionRevision); "" without
	// object, or objects no stored revision renders.
	Revision string
	// HasObject: the region has a per-region object.
	HasObject bool
	// Healthy: every object the update revision places in the region carries it and is current
	// and healthy (the status' judgement).
	Healthy bool
	// Failed: a copy of the region's revision reports Failed health.
	Failed bool
	// Live: the Region's heartbeat holds (Ready is not Unknown, and it reported once).
	Live bool
	// UpdateFailed: the update revision cannot be rendered for the region (an override that
	// does not apply); the message says why.
	UpdateFailed string
}

// RolloutInput is everything a rollout decision depends on.
type RolloutInput struct {
	// Strategy is spec.strategy.
	Strategy regionsyncv1alpha1.RolloutStrategy
	// Paused is spec.paused.
	Paused bool
	// Update is the update revision (of the spec as it is now); Stable the current one ("":
	// none yet, the first rollout).
	Update, Stable string
	// Stored reports whether a revision can be rendered (its ControllerRevision is kept).
	Stored func(string) bool
	// Previous is the last status.rollout written (nil: none).
	Previous *regionsyncv1alpha1.RolloutStatus
	// RetryAfter is D/retry-rollout (zero: none): a halt since before it is lifted.
	RetryAfter time.Time
	// Regions are the placeable regions, sorted by name.
	Regions []RegionView
	// Now is the decision's time.
	Now time.Time
	// RetryKey is the retry annotation's name (for messages).
	RetryKey string
}

// RolloutEvent is an Event the decision asks for.
type RolloutEvent struct {
	// Warning or Normal.
	Warning bool
	// Reason and Message of the Event.
	Reason, Message string
}

// RolloutPlan is a rollout decision: which revision each region gets, the status, and what to
// tell.
type RolloutPlan struct {
	// Want maps each region to the revision its object is rendered from ("" = none yet:
	// nothing is written, the region waits for its wave).
	Want map[string]string
	// Status is status.rollout.
	Status regionsyncv1alpha1.RolloutStatus
	// Progressing and Halted are the conditions' status, reason and message.
	Progressing, Halted Condition
	// NewHalt: the rollout halted in this decision (the halt is written before anything else).
	NewHalt bool
	// StartedWaves are the waves (from 1) started in this decision, with their regions.
	StartedWaves []StartedWave
	// Events to post.
	Events []RolloutEvent
	// RequeueAfter is when the decision may change with nothing else changing (a soak or a
	// progress deadline ending); 0: never.
	RequeueAfter time.Duration
}

// StartedWave is a wave a decision started.
type StartedWave struct {
	// Number from 1, and the wave's name.
	Number int
	Name   string
	// Regions of the wave.
	Regions []string
}

// Condition is a condition's status, reason and message.
type Condition struct {
	Status          metav1.ConditionStatus
	Reason, Message string
}

// Wave is one wave of a rollout: its name and its regions.
type Wave struct {
	Name    string
	Regions []string
}

// AssignWaves cuts the regions (sorted by name) into the strategy's waves: with spec.waves a
// region takes the first wave that selects it and the regions no wave selects form a last wave;
// with maxConcurrency, waves of that many regions (a percentage of them, rounded up); with
// neither, one region per wave. Waves selecting no region are left out. The error names the
// field.
func AssignWaves(s regionsyncv1alpha1.RolloutStrategy, regions []RegionView) ([]Wave, error) {
	if len(s.Waves) > 0 {
		sels := make([]labels.Selector, len(s.Waves))
		for i, w := range s.Waves {
			if w.RegionSelector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(w.RegionSelector)
			if err != nil {
				return nil, field.Invalid(field.NewPath("spec", "strategy", "waves").Index(i).Child("regionSelector"), "", err.Error())
			}
			sels[i] = sel
		}
		out := make([]Wave, len(s.Waves)+1)
		for i, w := range s.Waves {
			out[i].Name = cmp.Or(w.Name, fmt.Sprintf("wave-%d", i+1))
		}
		out[len(s.Waves)].Name = "rest"
		for _, r := range regions {
			i := slices.IndexFunc(s.Waves, func(w regionsyncv1alpha1.RolloutWave) bool { return slices.Contains(w.Regions, r.Name) })
			for j := range s.Waves {
				if (i < 0 || j < i) && sels[j] != nil && sels[j].Matches(labels.Set(r.Labels)) {
					i = j
					break
				}
			}
			if i < 0 {
				i = len(s.Waves) // no wave selects it: the last wave
			}
			out[i].Regions = append(out[i].Regions, r.Name)
		}
		return slices.DeleteFunc(out, func(w Wave) bool { return len(w.Regions) == 0 }), nil
	}
	size := 1
	if s.MaxConcurrency != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(s.MaxConcurrency, len(regions), true)
		if err != nil {
			return nil, field.Invalid(field.NewPath("spec", "strategy", "maxConcurrency"), s.MaxConcurrency.String(), err.Error())
		}
		size = max(n, 1)
	}
	var out []Wave
	for i := 0; i < len(regions); i += size {
		w := Wave{Name: fmt.Sprintf("wave-%d", len(out)+1)}
		for _, r := range regions[i:min(i+size, len(regions))] {
			w.Regions = append(w.Regions, r.Name)
		}
		out = append(out, w)
	}
	return out, nil
}

// MaxFailures resolves spec.strategy.maxFailures against the number of regions (a percentage
// rounds down); the error names the field.
func MaxFailures(s regionsyncv1alpha1.RolloutStrategy, regions int) (int, error) {
	if s.MaxFailures == nil {
		return 0, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(s.MaxFailures, regions, false)
	if err != nil {
		return 0, field.Invalid(field.NewPath("spec", "strategy", "maxFailures"), s.MaxFailures.String(), err.Error())
	}
	if n < 0 {
		return 0, field.Invalid(field.NewPath("spec", "strategy", "maxFailures"), s.MaxFailures.String(), "must not be negative")
	}
	return n, nil
}

// durations are the strategy's soak and progress deadline, defaulted.
func durations(s regionsyncv1alpha1.RolloutStrategy) (soak, deadline time.Duration) {
	soak, deadline = DefaultSoak, DefaultProgressDeadline
	if s.Soak != nil {
		soak = s.Soak.Duration
	}
	if s.ProgressDeadline != nil {
		deadline = s.ProgressDeadline.Duration
	}
	return soak, deadline
}

// failure is one region counted against maxFailures.
type failure struct {
	region, reason, message string
}

// DecideRollout decides which revision each region gets (see docs/design/rollouts.md#rollouts):
//   - Type All, or nothing to roll out (the update revision is the stable one): every region
//     gets the update revision.
//   - A halted rollout (status.rollout.halt of the update revision, not retried since) stays
//     halted: nothing more gets the update revision; after a rollback the updated regions keep
//     the stable one.
//   - Otherwise the wave in progress is the furthest of the one the status names and the last
//     one holding a region on the update revision. The waves up to it get the update revision
//     (a region joining a wave already completed keeps the stable revision until the rollout
//     completes); the next wave starts when every region of this one has been healthy for the
//     soak. Regions of started waves that are down, report Failed, cannot be rendered, or are
//     not healthy by the progress deadline are failures; more than maxFailures halt the rollout
//     (and, with onFailure Rollback, give the updated regions the stable revision back).
func DecideRollout(in RolloutInput) (RolloutPlan, error) {
	d := &decision{in: in, p: RolloutPlan{Want: map[string]string{}}, byName: make(map[string]RegionView, len(in.Regions)), prev: in.Previous}
	d.p.Status.UpdateRevision, d.p.Status.CurrentRevision = in.Update, in.Stable
	for _, r := range in.Regions {
		d.byName[r.Name] = r
	}
	if d.prev != nil && d.prev.UpdateRevision != in.Update {
		d.prev = nil // another revision's rollout: nothing of it carries over
	}
	if in.Strategy.Type != regionsyncv1alpha1.RolloutProgressive || in.Update == in.Stable {
		d.everywhere()
		return d.p, nil
	}
	var err error
	if d.waves, err = AssignWaves(in.Strategy, in.Regions); err != nil {
		return d.p, err
	}
	if d.limit, err = MaxFailures(in.Strategy, len(in.Regions)); err != nil {
		return d.p, err
	}
	d.soak, d.deadline = durations(in.Strategy)
	d.p.Status.Waves = int32(len(d.waves))
	if d.prev != nil && d.prev.Halt != nil {
		if !in.RetryAfter.After(d.prev.Halt.Since.Time) {
			d.stayHalted()
			return d.p, nil
		}
		d.prev = nil // retried: the rollout starts again, from the regions' revisions
		d.event(false, EventRolloutRetried, "rollout of revision %s retried (annotation after the halt)", in.Update)
	}
	if d.advance() {
		d.complete()
		return d.p, nil
	}
	d.assign()
	if f := d.failures(); len(f) > d.limit {
		d.halt(f)
		return d.p, nil
	}
	d.progress()
	return d.p, nil
}

// decision is DecideRollout's working state.
type decision struct {
	in     RolloutInput
	p      RolloutPlan
	byName map[string]RegionView
	prev   *regionsyncv1alpha1.RolloutStatus // of the same update revision, else nil
	waves  []Wave
	limit  int
	soak   time.Duration
	// deadline is the progress deadline.
	deadline time.Duration
	// k is the wave in progress (from 1), startedAt when it started, healthySince since when
	// every region of it is healthy (zero: not all are).
	k                       int
	startedAt, healthySince time.Time
}

// storedTime is t as the status keeps it: rounded up to the whole second, the precision of a
// metav1.Time. A wave's start, the start of its soak and a halt are decided with the time they
// are written with, so a decision after the status round trip (the next reconcile, another hub
// replica) agrees with the one before it, and a soak is never shorter than spec.strategy.soak.
func storedTime(t time.Time) time.Time {
	if s := t.Truncate(time.Second); !s.Equal(t) {
		return s.Add(time.Second)
	}
	return t
}

var notHalted = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonNotHalted, "nothing is halted"}

func (d *decision) event(warning bool, reason, format string, args ...any) {
	d.p.Events = append(d.p.Events, RolloutEvent{Warning: warning, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// keep is the revision a region keeps: its own when it is stored, else the stable one ("":
// none, nothing is written).
func (d *decision) keep(r RegionView) string {
	if r.Revision != "" && d.in.Stored(r.Revision) {
		return r.Revision
	}
	return d.in.Stable
}

// healthy reports whether a region is healthy for the update revision.
func (d *decision) healthy(r RegionView) bool {
	return r.Revision == d.in.Update && r.Healthy && r.Live
}

// count sets the updated and healthy counts from the plan.
func (d *decision) count() {
	st := &d.p.Status
	st.Updated, st.Healthy = 0, 0
	for _, r := range d.in.Regions {
		if d.p.Want[r.Name] == d.in.Update {
			st.Updated++
			if d.healthy(r) {
				st.Healthy++
			}
		}
	}
}

// everywhere gives every region the update revision (All, or nothing to roll out).
func (d *decision) everywhere() {
	for _, r := range d.in.Regions {
		d.p.Want[r.Name] = d.in.Update
	}
	d.count()
	st, n := &d.p.Status, len(d.in.Regions)
	d.p.Halted = notHalted
	if int(st.Healthy) == n {
		st.CurrentRevision = d.in.Update
		d.p.Progressing = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonRolloutComplete, fmt.Sprintf("revision %s runs healthy in every region (%d)", d.in.Update, n)}
		return
	}
	d.p.Progressing = Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonWaveInProgress, fmt.Sprintf("revision %s written to every region; %d of %d healthy", d.in.Update, st.Healthy, n)}
}

// stayHalted keeps a halted rollout halted: nothing more gets the update revision; after a
// rollback the updated regions keep the stable one.
func (d *decision) stayHalted() {
	h, st := d.prev.Halt.DeepCopy(), &d.p.Status
	st.Halt = h
	st.Wave, st.WaveName, st.WaveStartTime = d.prev.Wave, d.prev.WaveName, d.prev.WaveStartTime // where it halted
	for _, r := range d.in.Regions {
		d.p.Want[r.Name] = d.keep(r)
		if h.RolledBack && d.in.Stable != "" && d.p.Want[r.Name] == d.in.Update {
			d.p.Want[r.Name] = d.in.Stable
		}
	}
	d.count()
	st.Failed = int32(len(h.Regions))
	d.p.Halted, d.p.Progressing = haltConditions(h, d.in.Stable, d.in.RetryKey)
}

// advance finds the wave in progress (the furthest of the status' and the last holding a region
// on the update revision) and moves past every wave healthy for the soak; it reports whether
// the last wave is done.
func (d *decision) advance() bool {
	d.k = 1
	if d.prev != nil && d.prev.Wave > 0 {
		d.k = int(d.prev.Wave)
	}
	for i, w := range d.waves {
		if slices.ContainsFunc(w.Regions, func(n string) bool { return d.byName[n].Revision == d.in.Update }) {
			d.k = max(d.k, i+1)
		}
	}
	for ; d.k <= len(d.waves); d.k++ {
		w := d.waves[d.k-1]
		same := d.prev != nil && int(d.prev.Wave) == d.k
		d.startedAt = storedTime(d.in.Now)
		if same && d.prev.WaveStartTime != nil {
			d.startedAt = d.prev.WaveStartTime.Time
		} else if !d.in.Paused {
			d.p.StartedWaves = append(d.p.StartedWaves, StartedWave{Number: d.k, Name: w.Name, Regions: w.Regions})
		}
		d.healthySince = time.Time{}
		if slices.ContainsFunc(w.Regions, func(n string) bool { return !d.healthy(d.byName[n]) }) {
			return false
		}
		d.healthySince = storedTime(d.in.Now)
		if same && d.prev.WaveHealthyTime != nil {
			d.healthySince = d.prev.WaveHealthyTime.Time
		}
		if d.in.Paused || d.in.Now.Before(d.healthySince.Add(d.soak)) {
			return false
		}
		d.event(false, EventWaveCompleted, "wave %d/%d (%s) of revision %s healthy for %s", d.k, len(d.waves), w.Name, d.in.Update, d.soak)
		d.prev = nil
	}
	return true
}

// complete ends a rollout: every region on the update revision, which becomes the current one.
func (d *decision) complete() {
	for _, r := range d.in.Regions {
		d.p.Want[r.Name] = d.in.Update
	}
	st := &d.p.Status
	st.CurrentRevision, st.Wave = d.in.Update, 0
	d.count()
	msg := fmt.Sprintf("revision %s rolled out through %d waves", d.in.Update, len(d.waves))
	d.p.Progressing = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonRolloutComplete, msg}
	d.p.Halted = notHalted
	d.event(false, EventRolloutComplete, "%s", msg)
}

// assign decides who gets what: the started waves the update revision (paused: only who has it
// already); joiners of completed waves and the waves to come what they have (a new region: the
// stable revision).
func (d *decision) assign() {
	w := d.waves[d.k-1]
	st := &d.p.Status
	st.Wave, st.WaveName = int32(d.k), w.Name
	st.WaveStartTime = &metav1.Time{Time: d.startedAt}
	if !d.healthySince.IsZero() {
		st.WaveHealthyTime = &metav1.Time{Time: d.healthySince}
	}
	waveOf := d.waveOf()
	for _, r := range d.in.Regions {
		switch wave := waveOf[r.Name]; {
		case wave < d.k && r.Revision == d.in.Update, wave == d.k && (!d.in.Paused || r.Revision == d.in.Update):
			d.p.Want[r.Name] = d.in.Update
		default:
			d.p.Want[r.Name] = d.keep(r)
		}
	}
}

func (d *decision) waveOf() map[string]int {
	out := map[string]int{}
	for i, w := range d.waves {
		for _, n := range w.Regions {
			out[n] = i + 1
		}
	}
	return out
}

// failures are the regions of started waves on (or due) the update revision that are down,
// report Failed, cannot be rendered, or are not healthy by the progress deadline.
func (d *decision) failures() []failure {
	waveOf := d.waveOf()
	var out []failure
	for _, r := range d.in.Regions {
		if d.p.Want[r.Name] != d.in.Update {
			continue
		}
		switch {
		case r.UpdateFailed != "":
			out = append(out, failure{r.Name, regionsyncv1alpha1.ReasonApplyFailed, r.UpdateFailed})
		case !r.Live:
			out = append(out, failure{r.Name, regionsyncv1alpha1.ReasonRegionDown, "the region is not live (Ready Unknown or never reported)"})
		case r.Revision == d.in.Update && r.Failed:
			out = append(out, failure{r.Name, regionsyncv1alpha1.ReasonUnhealthy, "the copy reports Failed health"})
		case waveOf[r.Name] == d.k && !d.healthy(r) && !d.in.Now.Before(d.startedAt.Add(d.deadline)):
			out = append(out, failure{r.Name, regionsyncv1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("not healthy within %s of the wave's start", d.deadline)})
		}
	}
	d.p.Status.Failed = int32(len(out))
	return out
}

// halt stops the rollout on its failures: nothing more gets the update revision, and with
// Rollback the updated regions get the stable revision back.
func (d *decision) halt(failures []failure) {
	in := d.in
	h := &regionsyncv1alpha1.RolloutHalt{
		Revision: in.Update, Reason: failures[0].reason, Since: metav1.Time{Time: storedTime(in.Now)},
		RolledBack: in.Strategy.OnFailure == regionsyncv1alpha1.FailureRollback && in.Stable != "" && in.Stored(in.Stable),
	}
	parts := make([]string, 0, len(failures))
	for _, f := range failures {
		if len(h.Regions) < maxHaltRegions {
			h.Regions = append(h.Regions, f.region)
		}
		parts = append(parts, f.region+" ("+f.reason+": "+f.message+")")
	}
	h.Message = fmt.Sprintf("%d failed regions, more than maxFailures %d: %s", len(failures), d.limit, summary(parts))
	d.p.Status.Halt, d.p.NewHalt = h, true
	d.p.Status.WaveHealthyTime = nil
	for _, r := range in.Regions {
		if d.p.Want[r.Name] == in.Update && r.Revision != in.Update {
			d.p.Want[r.Name] = d.keep(r) // not written yet: never written now
		}
		if h.RolledBack && d.p.Want[r.Name] == in.Update {
			d.p.Want[r.Name] = in.Stable
		}
	}
	d.p.StartedWaves = nil
	d.count()
	d.p.Halted, d.p.Progressing = haltConditions(h, in.Stable, in.RetryKey)
	d.event(true, EventRolloutHalted, "rollout of revision %s halted in wave %d/%d: %s", in.Update, d.k, len(d.waves), h.Message)
	if h.RolledBack {
		d.event(true, EventRolledBack, "the regions updated to %s were given %s back", in.Update, in.Stable)
	}
}

// progress reports a rollout going on (or paused), and when to look again.
func (d *decision) progress() {
	in, w := d.in, d.waves[d.k-1]
	d.count()
	d.p.Halted = notHalted
	switch {
	case in.Paused:
		d.p.Progressing = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonPaused, fmt.Sprintf("spec.paused holds the rollout of revision %s in wave %d/%d (%s)", in.Update, d.k, len(d.waves), w.Name)}
	case d.p.Status.WaveHealthyTime != nil:
		end := d.healthySince.Add(d.soak)
		d.p.RequeueAfter = end.Sub(in.Now)
		d.p.Progressing = Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonSoaking, fmt.Sprintf("wave %d/%d (%s) of revision %s healthy; soaking until %s", d.k, len(d.waves), w.Name, in.Update, end.UTC().Format(time.RFC3339))}
	default:
		healthy := 0
		for _, n := range w.Regions {
			if d.healthy(d.byName[n]) {
				healthy++
			}
		}
		d.p.RequeueAfter = d.startedAt.Add(d.deadline).Sub(in.Now)
		d.p.Progressing = Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonWaveInProgress, fmt.Sprintf("wave %d/%d (%s) of revision %s: %d of %d regions healthy", d.k, len(d.waves), w.Name, in.Update, healthy, len(w.Regions))}
	}
	for _, sw := range d.p.StartedWaves {
		d.event(false, EventWaveStarted, "wave %d/%d (%s) of revision %s started: %s", sw.Number, len(d.waves), sw.Name, in.Update, summary(sw.Regions))
	}
}

// haltConditions are Halted and Progressing of a halted rollout.
func haltConditions(h *regionsyncv1alpha1.RolloutHalt, stable, retryKey string) (halted, progressing Condition) {
	msg := fmt.Sprintf("rollout of revision %s halted since %s (%s in %s): %s; retry with the annotation %s=<RFC 3339 time after that>, or change the spec",
		h.Revision, h.Since.UTC().Format(time.RFC3339), h.Reason, strings.Join(h.Regions, ", "), h.Message, retryKey)
	reason := regionsyncv1alpha1.ReasonRolloutHalted
	if h.RolledBack {
		reason = regionsyncv1alpha1.ReasonRolledBack
		msg += "; the updated regions were given " + stable + " back"
	}
	return Condition{metav1.ConditionTrue, reason, msg}, Condition{metav1.ConditionFalse, reason, "the rollout halted (see Halted)"}
}
