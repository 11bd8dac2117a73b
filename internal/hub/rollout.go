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
	// Revision is the D/revision of the region's per-region object ("" without object, or an
	// object no stored revision renders).
	Revision string
	// HasObject: the region has a per-region object.
	HasObject bool
	// Healthy: the object is current and healthy as it is (the status' judgement).
	Healthy bool
	// Failed: the copy reports Failed health.
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

// DecideRollout decides which revision each region gets (see docs/design.md#rollouts):
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
	p := RolloutPlan{Want: map[string]string{}}
	st := &p.Status
	st.UpdateRevision, st.CurrentRevision = in.Update, in.Stable
	byName := make(map[string]RegionView, len(in.Regions))
	for _, r := range in.Regions {
		byName[r.Name] = r
	}
	keep := func(r RegionView) string {
		switch {
		case r.Revision != "" && in.Stored(r.Revision):
			return r.Revision
		case in.Stable != "":
			return in.Stable
		}
		return ""
	}
	healthyFor := func(r RegionView, rev string) bool { return r.Revision == rev && r.Healthy && r.Live }
	count := func() {
		st.Updated, st.Healthy = 0, 0
		for _, r := range in.Regions {
			if p.Want[r.Name] == in.Update {
				st.Updated++
				if healthyFor(r, in.Update) {
					st.Healthy++
				}
			}
		}
	}
	prev := in.Previous
	if prev != nil && prev.UpdateRevision != in.Update {
		prev = nil // another revision's rollout: nothing of it carries over
	}

	if in.Strategy.Type != regionsyncv1alpha1.RolloutProgressive || in.Update == in.Stable {
		for _, r := range in.Regions {
			p.Want[r.Name] = in.Update
		}
		count()
		p.Halted = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonNotHalted, "nothing is halted"}
		if int(st.Healthy) == len(in.Regions) {
			st.CurrentRevision = in.Update
			p.Progressing = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonRolloutComplete, fmt.Sprintf("revision %s runs healthy in every region (%d)", in.Update, len(in.Regions))}
		} else {
			p.Progressing = Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonWaveInProgress, fmt.Sprintf("revision %s written to every region; %d of %d healthy", in.Update, st.Healthy, len(in.Regions))}
		}
		return p, nil
	}

	waves, err := AssignWaves(in.Strategy, in.Regions)
	if err != nil {
		return p, err
	}
	limit, err := MaxFailures(in.Strategy, len(in.Regions))
	if err != nil {
		return p, err
	}
	soak, deadline := durations(in.Strategy)
	st.Waves = int32(len(waves))

	// A halted rollout stays halted until retried or replaced by another revision.
	if prev != nil && prev.Halt != nil && prev.Halt.Revision == in.Update && !in.RetryAfter.After(prev.Halt.Since.Time) {
		h := prev.Halt.DeepCopy()
		st.Halt = h
		st.Wave, st.WaveName, st.WaveStartTime = prev.Wave, prev.WaveName, prev.WaveStartTime // where it halted
		for _, r := range in.Regions {
			p.Want[r.Name] = keep(r)
			if h.RolledBack && in.Stable != "" && p.Want[r.Name] == in.Update {
				p.Want[r.Name] = in.Stable
			}
		}
		count()
		st.Failed = int32(len(h.Regions))
		p.Halted, p.Progressing = haltConditions(h, in.Stable, in.RetryKey)
		return p, nil
	}
	if prev != nil && prev.Halt != nil {
		prev = nil // retried: the rollout starts again, from the regions' revisions
		p.Events = append(p.Events, RolloutEvent{Reason: EventRolloutRetried, Message: fmt.Sprintf("rollout of revision %s retried (annotation after the halt)", in.Update)})
	}

	// The wave in progress: the furthest of the status' and the last holding the update revision.
	k := 1
	if prev != nil && prev.Wave > 0 {
		k = int(prev.Wave)
	}
	for i, w := range waves {
		if slices.ContainsFunc(w.Regions, func(n string) bool { return byName[n].Revision == in.Update }) {
			k = max(k, i+1)
		}
	}
	sameWave := func(k int) bool { return prev != nil && int(prev.Wave) == k }
	var startedAt, healthySince time.Time
	for {
		if k > len(waves) {
			for _, r := range in.Regions {
				p.Want[r.Name] = in.Update
			}
			st.CurrentRevision, st.Wave = in.Update, 0
			count()
			p.Progressing = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonRolloutComplete, fmt.Sprintf("revision %s rolled out through %d waves", in.Update, len(waves))}
			p.Halted = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonNotHalted, "nothing is halted"}
			p.Events = append(p.Events, RolloutEvent{Reason: EventRolloutComplete, Message: fmt.Sprintf("revision %s rolled out through %d waves", in.Update, len(waves))})
			return p, nil
		}
		w := waves[k-1]
		started := sameWave(k) && prev.WaveStartTime != nil
		startedAt = in.Now
		if started {
			startedAt = prev.WaveStartTime.Time
		}
		if !started && !in.Paused {
			p.StartedWaves = append(p.StartedWaves, StartedWave{Number: k, Name: w.Name, Regions: w.Regions})
		}
		healthy := !slices.ContainsFunc(w.Regions, func(n string) bool { return !healthyFor(byName[n], in.Update) })
		healthySince = time.Time{}
		if healthy {
			healthySince = in.Now
			if sameWave(k) && prev.WaveHealthyTime != nil {
				healthySince = prev.WaveHealthyTime.Time
			}
		}
		if healthy && !in.Paused && !in.Now.Before(healthySince.Add(soak)) {
			p.Events = append(p.Events, RolloutEvent{Reason: EventWaveCompleted, Message: fmt.Sprintf("wave %d/%d (%s) of revision %s healthy for %s", k, len(waves), w.Name, in.Update, soak)})
			k++
			prev = nil
			continue
		}
		break
	}
	w := waves[k-1]
	st.Wave, st.WaveName = int32(k), w.Name
	st.WaveStartTime = &metav1.Time{Time: startedAt}
	if !healthySince.IsZero() {
		st.WaveHealthyTime = &metav1.Time{Time: healthySince}
	}

	// Who gets what: started waves the update revision (paused: only who has it already),
	// joiners of completed waves and the waves to come what they have (a new region: stable).
	waveOf := map[string]int{}
	for i, wv := range waves {
		for _, n := range wv.Regions {
			waveOf[n] = i + 1
		}
	}
	for _, r := range in.Regions {
		switch {
		case waveOf[r.Name] < k && r.Revision == in.Update, waveOf[r.Name] == k && (!in.Paused || r.Revision == in.Update):
			p.Want[r.Name] = in.Update
		default:
			p.Want[r.Name] = keep(r)
		}
	}

	// Failures: regions of started waves on (or due) the update revision.
	var failures []failure
	for _, r := range in.Regions {
		if p.Want[r.Name] != in.Update {
			continue
		}
		switch {
		case r.UpdateFailed != "":
			failures = append(failures, failure{r.Name, regionsyncv1alpha1.ReasonApplyFailed, r.UpdateFailed})
		case !r.Live:
			failures = append(failures, failure{r.Name, regionsyncv1alpha1.ReasonRegionDown, "the region is not live (Ready Unknown or never reported)"})
		case r.Revision == in.Update && r.Failed:
			failures = append(failures, failure{r.Name, regionsyncv1alpha1.ReasonUnhealthy, "the copy reports Failed health"})
		case waveOf[r.Name] == k && !healthyFor(r, in.Update) && !in.Now.Before(startedAt.Add(deadline)):
			failures = append(failures, failure{r.Name, regionsyncv1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("not healthy within %s of the wave's start", deadline)})
		}
	}
	st.Failed = int32(len(failures))
	if len(failures) > limit {
		h := &regionsyncv1alpha1.RolloutHalt{
			Revision: in.Update, Reason: failures[0].reason, Since: metav1.Time{Time: in.Now},
			RolledBack: in.Strategy.OnFailure == regionsyncv1alpha1.FailureRollback && in.Stable != "",
		}
		var parts []string
		for _, f := range failures {
			if len(h.Regions) < maxHaltRegions {
				h.Regions = append(h.Regions, f.region)
			}
			parts = append(parts, f.region+" ("+f.reason+": "+f.message+")")
		}
		h.Message = fmt.Sprintf("%d failed regions, more than maxFailures %d: %s", len(failures), limit, summary(parts))
		st.Halt, p.NewHalt = h, true
		st.WaveHealthyTime = nil
		for _, r := range in.Regions {
			if p.Want[r.Name] == in.Update && r.Revision != in.Update {
				p.Want[r.Name] = keep(r) // not written yet: never written now
			}
			if h.RolledBack && p.Want[r.Name] == in.Update {
				p.Want[r.Name] = in.Stable
			}
		}
		p.StartedWaves = nil
		count()
		p.Halted, p.Progressing = haltConditions(h, in.Stable, in.RetryKey)
		p.Events = append(p.Events, RolloutEvent{Warning: true, Reason: EventRolloutHalted, Message: fmt.Sprintf("rollout of revision %s halted in wave %d/%d: %s", in.Update, k, len(waves), h.Message)})
		if h.RolledBack {
			p.Events = append(p.Events, RolloutEvent{Warning: true, Reason: EventRolledBack, Message: fmt.Sprintf("the regions updated to %s were given %s back", in.Update, in.Stable)})
		}
		return p, nil
	}
	count()
	p.Halted = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonNotHalted, "nothing is halted"}
	switch {
	case in.Paused:
		p.Progressing = Condition{metav1.ConditionFalse, regionsyncv1alpha1.ReasonPaused, fmt.Sprintf("spec.paused holds the rollout of revision %s in wave %d/%d (%s)", in.Update, k, len(waves), w.Name)}
	case st.WaveHealthyTime != nil:
		end := healthySince.Add(soak)
		p.RequeueAfter = end.Sub(in.Now)
		p.Progressing = Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonSoaking, fmt.Sprintf("wave %d/%d (%s) of revision %s healthy; soaking until %s", k, len(waves), w.Name, in.Update, end.UTC().Format(time.RFC3339))}
	default:
		p.RequeueAfter = startedAt.Add(deadline).Sub(in.Now)
		p.Progressing = Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonWaveInProgress, fmt.Sprintf("wave %d/%d (%s) of revision %s: %d of %d regions healthy", k, len(waves), w.Name, in.Update, countHealthy(w, byName, in.Update), len(w.Regions))}
	}
	for _, sw := range p.StartedWaves {
		p.Events = append(p.Events, RolloutEvent{Reason: EventWaveStarted, Message: fmt.Sprintf("wave %d/%d (%s) of revision %s started: %s", sw.Number, len(waves), sw.Name, in.Update, summary(sw.Regions))})
	}
	return p, nil
}

func countHealthy(w Wave, byName map[string]RegionView, rev string) int {
	n := 0
	for _, name := range w.Regions {
		r := byName[name]
		if r.Revision == rev && r.Healthy && r.Live {
			n++
		}
	}
	return n
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
