//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
	"github.com/regionsync/regionsync/internal/hub"
	"github.com/regionsync/regionsync/internal/shard"
	"github.com/regionsync/regionsync/test/framework/fleet"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// The rollout scenario's Distribution, its namespace on management, and its soak.
const (
	rolloutNamespace = "tenant-rollout"
	rolloutName      = "checkout"
	rolloutSoak      = 3 * time.Second
)

// rolloutTemplate is a demo Tenant with display name and plan (the demo tenant operator reports
// a plan it does not know Stalled, which kstatus reads as Failed).
func rolloutTemplate(display, plan string) runtime.RawExtension {
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
		"spec": map[string]any{"displayName": display, "plan": plan, "replicas": 1},
	})
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// rolloutWaves cuts regions into the scenario's three waves: the first region (canary), the
// next half of the others (early) and the rest.
func rolloutWaves(regions []string) [][]string {
	early := 1 + (len(regions)-1)/2
	return [][]string{regions[:1], regions[1:early], regions[early:]}
}

// RunRolloutScenario runs a progressive rollout (strategy Progressive, soak rolloutSoak,
// onFailure Rollback) of a Distribution of the demo Tenant over every region of the fleet (at
// least 3) in three waves: a good template goes through every wave in order, each wave starting
// only after the previous one's soak; a bad template (an unknown plan: the tenant operator
// reports it Stalled) updates only the first wave, halts the rollout and the first wave's
// copies are given the previous spec back by the hub; a region whose agents stop mid-rollout is
// a failure that halts it, naming the region, and the updated regions get the previous spec back.
func RunRolloutScenario(t *testing.T, f fleet.Fleet) {
	ctx := context.Background()
	regions := f.Regions()
	if len(regions) < 3 {
		t.Fatalf("the rollout scenario needs 3 regions or more for its three waves; regions %v", regions)
	}
	waves := rolloutWaves(regions)
	author, err := f.ManagementAs(distAuthor)
	if err != nil {
		t.Fatal(err)
	}
	s := &rolloutScenario{distScenario: distScenario{f: f, keys: shard.NewKeys("regionsync.dev"), author: author}, regions: regions, waves: waves}
	t.Logf("rollout: waves %v, soak %s", waves, rolloutSoak)
	var stable string

	t.Run("rollout: a good template rolls through every wave in order, each after the previous one's soak", func(t *testing.T) {
		s.tenantNamespace(t, rolloutNamespace, regions, writeTenantsRule)
		d := &regionsyncv1alpha1.Distribution{
			ObjectMeta: metav1.ObjectMeta{Namespace: rolloutNamespace, Name: rolloutName},
			Spec: regionsyncv1alpha1.DistributionSpec{
				Template:  rolloutTemplate("v1", "team"),
				Placement: regionsyncv1alpha1.Placement{Regions: regions},
				Strategy: regionsyncv1alpha1.RolloutStrategy{
					Type: regionsyncv1alpha1.RolloutProgressive,
					Waves: []regionsyncv1alpha1.RolloutWave{
						{Name: "canary", Regions: waves[0]},
						{Name: "early", Regions: waves[1]},
					},
					Soak:      &metav1.Duration{Duration: rolloutSoak},
					OnFailure: regionsyncv1alpha1.FailureRollback,
				},
				ServiceAccountName: placerServiceAccount,
			},
		}
		if err := author.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		s.waitComplete(t, "v1")
		// A good change: wave by wave again, from the stable revision to the new one.
		s.updateSpec(t, rolloutNamespace, rolloutName, func(d *regionsyncv1alpha1.Distribution) {
			d.Spec.Template = rolloutTemplate("v2", "enterprise")
		})
		stable = s.waitComplete(t, "v2")
		s.checkWaveEvents(t, stable)
		waitHubEvent(t, f.Management(), rolloutNamespace, rolloutName, corev1.EventTypeNormal, hub.EventRolloutComplete)
	})
	if stable == "" {
		t.Fatal("no stable revision: the good rollout did not complete")
	}

	t.Run("rollout: a bad template updates the first wave only, halts, and is rolled back", func(t *testing.T) {
		s.updateSpec(t, rolloutNamespace, rolloutName, func(d *regionsyncv1alpha1.Distribution) {
			d.Spec.Template = rolloutTemplate("v3", "platinum") // a plan the operator does not serve
		})
		halt := s.waitHalted(t, regionsyncv1alpha1.ReasonUnhealthy, waves[0][0], stable)
		if !slices.Equal(halt.Regions, waves[0]) {
			t.Errorf("halted naming %v, want the first wave %v", halt.Regions, waves[0])
		}
		waitHubEvent(t, f.Management(), rolloutNamespace, rolloutName, corev1.EventTypeWarning, hub.EventRolloutHalted)
		waitHubEvent(t, f.Management(), rolloutNamespace, rolloutName, corev1.EventTypeWarning, hub.EventRolledBack)
		// Only the first wave was ever updated: no Event starts a later wave of the bad revision.
		if n := s.waveStarts(t, halt.Revision); len(n) != 1 || n[0].wave != 1 {
			t.Errorf("waves started for the bad revision %s: %+v, want wave 1 only", halt.Revision, n)
		}
		s.waitOn(t, "every region back on v2, nothing of v3 left", stable, "v2", regions)
		testenv.Consistently(t, "the halted revision is not applied again by itself", rolloutSoak+time.Second, func() error {
			return s.onRevision(stable, "v2", regions)
		})
	})

	t.Run("rollout: a region whose agents stop mid-rollout halts it, named, and the updated regions are rolled back", func(t *testing.T) {
		down := waves[2][len(waves[2])-1]
		s.updateSpec(t, rolloutNamespace, rolloutName, func(d *regionsyncv1alpha1.Distribution) {
			d.Spec.Template = rolloutTemplate("v4", "free")
		})
		testenv.Eventually(t, "the v4 rollout under way", time.Minute, func() error {
			d := s.get(ctx, rolloutNamespace, rolloutName)
			if d == nil || d.Status.Rollout == nil || d.Status.Rollout.UpdateRevision == stable || d.Status.Rollout.Wave < 1 || d.Status.ObservedGeneration != d.Generation {
				return fmt.Errorf("rollout %+v", d.Status.Rollout)
			}
			return nil
		})
		if err := f.StopAgents(ctx, down); err != nil {
			t.Fatal(err)
		}
		started := false
		defer func() {
			if !started {
				_ = f.StartAgents(ctx, down)
			}
		}()
		halt := s.waitHalted(t, regionsyncv1alpha1.ReasonRegionDown, down, stable)
		if !slices.Contains(halt.Regions, down) {
			t.Errorf("halted naming %v, not %s", halt.Regions, down)
		}
		var live []string
		for _, r := range regions {
			if r != down {
				live = append(live, r)
			}
		}
		s.waitOn(t, "the live regions back on v2", stable, "v2", live)
		started = true
		if err := f.StartAgents(ctx, down); err != nil {
			t.Fatal(err)
		}
		s.waitReady(t, down, metav1.ConditionTrue, "")
		s.waitOn(t, "every region on v2, "+down+" included", stable, "v2", regions)
		if d := s.get(ctx, rolloutNamespace, rolloutName); d == nil || !meta.IsStatusConditionTrue(d.Status.Conditions, regionsyncv1alpha1.DistributionHalted) {
			t.Errorf("the rollout is no longer halted once %s is back: %+v", down, d)
		}
		deleteDistribution(ctx, t, f.Management(), author, s.keys, &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: rolloutNamespace, Name: rolloutName}},
			"the Distribution deleted with every region's object", 2*time.Minute, func() error {
				if s.get(ctx, rolloutNamespace, rolloutName) != nil {
					return errors.New("the Distribution still exists")
				}
				for _, r := range regions {
					if err := s.absent(ctx, rolloutNamespace, rolloutName, r); err != nil {
						return err
					}
				}
				return nil
			})
	})
}

// rolloutScenario holds what the rollout scenario's steps share.
type rolloutScenario struct {
	distScenario
	regions []string
	waves   [][]string
}

// revisions returns the revision each region's per-region object carries ("" when it has none).
func (s *rolloutScenario) revisions(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	for _, r := range s.regions {
		obj := &demov1alpha1.Tenant{}
		err := s.f.Management().Get(ctx, client.ObjectKey{Namespace: rolloutNamespace, Name: rolloutName + "-" + r}, obj)
		if client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		out[r] = obj.Annotations[s.keys.Revision]
	}
	return out, nil
}

// checkOrder fails t when a region carries update while a region of an earlier wave does not:
// a wave never starts before every earlier one has the update.
func (s *rolloutScenario) checkOrder(t *testing.T, revs map[string]string, update string) {
	t.Helper()
	for k := 1; k < len(s.waves); k++ {
		for _, r := range s.waves[k] {
			if revs[r] != update {
				continue
			}
			for _, earlier := range slices.Concat(s.waves[:k]...) {
				if revs[earlier] != update {
					t.Errorf("%s (wave %d) carries %s while %s of an earlier wave carries %q", r, k+1, update, earlier, revs[earlier])
				}
			}
		}
	}
}

// waitComplete waits for the rollout of the template displayed as display to complete (every
// region's per-region object on the update revision, every copy holding it, the update revision
// the stable one, Progressing RolloutComplete), checking on the way that no wave ran ahead of an
// earlier one. It returns the revision.
func (s *rolloutScenario) waitComplete(t *testing.T, display string) string {
	t.Helper()
	ctx := context.Background()
	var rev string
	testenv.Eventually(t, "the rollout of "+display+" complete in every region", 3*time.Minute, func() error {
		d := s.get(ctx, rolloutNamespace, rolloutName)
		if d == nil || d.Status.Rollout == nil || d.Status.ObservedGeneration != d.Generation {
			return errors.New("no rollout status for the Distribution's generation yet")
		}
		st := d.Status.Rollout
		revs, err := s.revisions(ctx)
		if err != nil {
			return err
		}
		s.checkOrder(t, revs, st.UpdateRevision)
		if c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionProgressing); c == nil || c.Reason != regionsyncv1alpha1.ReasonRolloutComplete || st.CurrentRevision != st.UpdateRevision {
			return fmt.Errorf("rollout %+v, Progressing %+v", st, c)
		}
		if err := s.onRevision(st.UpdateRevision, display, s.regions); err != nil {
			return err
		}
		rev = st.UpdateRevision
		return nil
	})
	return rev
}

// onRevision says why a region of regions does not run rev: its per-region object carries
// another revision, or its copy another display name.
func (s *rolloutScenario) onRevision(rev, display string, regions []string) error {
	ctx := context.Background()
	revs, err := s.revisions(ctx)
	if err != nil {
		return err
	}
	for _, r := range regions {
		if revs[r] != rev {
			return fmt.Errorf("%s's per-region object carries revision %q, want %s", r, revs[r], rev)
		}
		cp := &demov1alpha1.Tenant{}
		if err := s.f.Region(r).Get(ctx, client.ObjectKey{Namespace: rolloutNamespace, Name: rolloutName}, cp); err != nil {
			return fmt.Errorf("%s's copy: %w", r, err)
		}
		if cp.Spec.DisplayName != display {
			return fmt.Errorf("%s's copy shows %q, want %q", r, cp.Spec.DisplayName, display)
		}
	}
	return nil
}

// waitOn waits until every region of regions runs rev (per-region object and copy).
func (s *rolloutScenario) waitOn(t *testing.T, what, rev, display string, regions []string) {
	t.Helper()
	testenv.Eventually(t, what, 2*time.Minute, func() error { return s.onRevision(rev, display, regions) })
}

// waitHalted waits until the rollout halts with reason, naming region, rolled back to stable,
// and returns the halt; meanwhile no wave runs ahead of an earlier one.
func (s *rolloutScenario) waitHalted(t *testing.T, reason, region, stable string) regionsyncv1alpha1.RolloutHalt {
	t.Helper()
	ctx := context.Background()
	var halt regionsyncv1alpha1.RolloutHalt
	testenv.Eventually(t, fmt.Sprintf("the rollout halted (%s, naming %s) and rolled back", reason, region), 3*time.Minute, func() error {
		// The objects first, then the status: the hub writes a halt before the rollback's first
		// write, so objects read before a status without a halt were written in wave order.
		revs, err := s.revisions(ctx)
		if err != nil {
			return err
		}
		d := s.get(ctx, rolloutNamespace, rolloutName)
		if d == nil || d.Status.Rollout == nil {
			return errors.New("no rollout status")
		}
		st := d.Status.Rollout
		if st.Halt == nil && d.Status.ObservedGeneration == d.Generation {
			s.checkOrder(t, revs, st.UpdateRevision)
		}
		c := meta.FindStatusCondition(d.Status.Conditions, regionsyncv1alpha1.DistributionHalted)
		if c == nil || c.Status != metav1.ConditionTrue || st.Halt == nil {
			return fmt.Errorf("condition Halted %+v, rollout %+v", c, st)
		}
		if st.Halt.Reason != reason || !slices.Contains(st.Halt.Regions, region) || !st.Halt.RolledBack || st.Halt.Revision != st.UpdateRevision || st.CurrentRevision != stable {
			return fmt.Errorf("halt %+v, rollout stable %s update %s; want %s naming %s, rolled back to %s", st.Halt, st.CurrentRevision, st.UpdateRevision, reason, region, stable)
		}
		if !strings.Contains(c.Message, region) {
			return fmt.Errorf("Halted=True says %q, not naming %s", c.Message, region)
		}
		halt = *st.Halt
		return nil
	})
	return halt
}

// waveEvent is a WaveStarted or WaveCompleted Event of the hub.
type waveEvent struct {
	wave int
	at   time.Time
}

// waveEvents returns the hub's Events of reason ("started" or "healthy" in their note) about
// the Distribution for revision rev, by wave.
func (s *rolloutScenario) waveEvents(t *testing.T, reason, rev string) []waveEvent {
	t.Helper()
	evs := &eventsv1.EventList{}
	if err := s.f.Management().List(context.Background(), evs, client.InNamespace(rolloutNamespace)); err != nil {
		t.Fatal(err)
	}
	byWave := map[int]time.Time{}
	for _, ev := range evs.Items {
		if ev.Regarding.Kind != "Distribution" || ev.Regarding.Name != rolloutName || ev.Reason != reason || !strings.Contains(ev.Note, " of revision "+rev+" ") {
			continue
		}
		var k, n int
		if _, err := fmt.Sscanf(ev.Note, "wave %d/%d", &k, &n); err != nil || n != len(s.waves) {
			t.Errorf("%s Event %q: not of wave k/%d (%v)", reason, ev.Note, len(s.waves), err)
			continue
		}
		at := ev.EventTime.Time
		if at.IsZero() {
			at = ev.CreationTimestamp.Time
		}
		if first, ok := byWave[k]; !ok || at.Before(first) {
			byWave[k] = at // a repeated Event (another reconcile, the other hub replica): the first
		}
	}
	out := make([]waveEvent, 0, len(byWave))
	for k, at := range byWave {
		out = append(out, waveEvent{wave: k, at: at})
	}
	slices.SortFunc(out, func(a, b waveEvent) int { return a.wave - b.wave })
	return out
}

// waveStarts returns the WaveStarted Events of revision rev, by wave.
func (s *rolloutScenario) waveStarts(t *testing.T, rev string) []waveEvent {
	return s.waveEvents(t, hub.EventWaveStarted, rev)
}

// checkWaveEvents checks the Events of rev's rollout: every wave started once and completed
// once, in order, each wave started no earlier than the previous one's completion, and at least
// the soak after the previous one started.
func (s *rolloutScenario) checkWaveEvents(t *testing.T, rev string) {
	t.Helper()
	var started, completed []waveEvent
	testenv.Eventually(t, "an Event for the start and the completion of every wave of "+rev, 30*time.Second, func() error {
		started, completed = s.waveStarts(t, rev), s.waveEvents(t, hub.EventWaveCompleted, rev)
		if len(started) != len(s.waves) || len(completed) != len(s.waves) {
			return fmt.Errorf("%d WaveStarted, %d WaveCompleted Events, want %d each", len(started), len(completed), len(s.waves))
		}
		return nil
	})
	for k := range s.waves {
		if started[k].wave != k+1 || completed[k].wave != k+1 {
			t.Fatalf("wave Events %+v %+v, want one per wave 1..%d", started, completed, len(s.waves))
		}
		if completed[k].at.Before(started[k].at) {
			t.Errorf("wave %d completed at %s, before it started at %s", k+1, completed[k].at, started[k].at)
		}
		if k == 0 {
			continue
		}
		if started[k].at.Before(completed[k-1].at) {
			t.Errorf("wave %d started at %s, before wave %d completed at %s", k+1, started[k].at, k, completed[k-1].at)
		}
		if gap := started[k].at.Sub(started[k-1].at); gap < rolloutSoak {
			t.Errorf("wave %d started %s after wave %d, less than the soak %s", k+1, gap, k, rolloutSoak)
		}
	}
	offsets := make([]string, 0, len(started))
	for _, w := range started {
		offsets = append(offsets, fmt.Sprintf("wave %d +%s", w.wave, w.at.Sub(started[0].at).Round(10*time.Millisecond)))
	}
	t.Logf("rollout of %s: %s (soak %s)", rev, strings.Join(offsets, ", "), rolloutSoak)
}
