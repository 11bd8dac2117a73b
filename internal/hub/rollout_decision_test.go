package hub

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	regionsyncv1alpha1 "github.com/regionsync/regionsync/api/v1alpha1"
)

func views(names ...string) []RegionView {
	out := make([]RegionView, 0, len(names))
	for _, n := range names {
		name, tier, _ := strings.Cut(n, ":")
		out = append(out, RegionView{Name: name, Labels: map[string]string{"tier": tier}})
	}
	return out
}

func waveNames(ws []Wave) []string {
	out := make([]string, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.Name+"="+strings.Join(w.Regions, ","))
	}
	return out
}

func TestAssignWaves(t *testing.T) {
	canary := &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}
	pct := intstr.FromString("40%")
	two := intstr.FromInt32(2)
	cases := map[string]struct {
		strategy regionsyncv1alpha1.RolloutStrategy
		regions  []RegionView
		want     []string
		err      string
	}{
		"by name, by selector, the rest last": {
			strategy: regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{
				{Name: "first", Regions: []string{"b"}},
				{Name: "canaries", RegionSelector: canary},
			}},
			regions: views("a:prod", "b:prod", "c:canary", "d:canary", "e:prod"),
			want:    []string{"first=b", "canaries=c,d", "rest=a,e"},
		},
		"the first wave that selects a region takes it": {
			strategy: regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{
				{RegionSelector: canary},
				{Regions: []string{"c", "a"}},
			}},
			regions: views("a:prod", "c:canary"),
			want:    []string{"wave-1=c", "wave-2=a"},
		},
		"a wave selecting nothing is left out; no rest wave when every region is taken": {
			strategy: regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{
				{Name: "none", Regions: []string{"zz"}},
				{Name: "all", RegionSelector: &metav1.LabelSelector{}},
			}},
			regions: views("a:prod", "b:dev"),
			want:    []string{"all=a,b"},
		},
		"maxConcurrency count": {
			strategy: regionsyncv1alpha1.RolloutStrategy{MaxConcurrency: &two},
			regions:  views("a", "b", "c", "d", "e"),
			want:     []string{"wave-1=a,b", "wave-2=c,d", "wave-3=e"},
		},
		"maxConcurrency percentage rounds up": {
			strategy: regionsyncv1alpha1.RolloutStrategy{MaxConcurrency: &pct},
			regions:  views("a", "b", "c", "d", "e"),
			want:     []string{"wave-1=a,b", "wave-2=c,d", "wave-3=e"},
		},
		"neither: one region per wave": {
			regions: views("a", "b"),
			want:    []string{"wave-1=a", "wave-2=b"},
		},
		"an invalid selector names the field": {
			strategy: regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{
				{Regions: []string{"a"}},
				{RegionSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}},
			}},
			err: "spec.strategy.waves[1].regionSelector",
		},
		"a bad percentage names the field": {
			strategy: regionsyncv1alpha1.RolloutStrategy{MaxConcurrency: ptrTo(intstr.FromString("lots"))},
			regions:  views("a"),
			err:      "spec.strategy.maxConcurrency",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := AssignWaves(tc.strategy, tc.regions)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, waveNames(got)); diff != "" {
				t.Errorf("waves (-want +got):\n%s", diff)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestMaxFailures(t *testing.T) {
	cases := map[string]struct {
		v       *intstr.IntOrString
		regions int
		want    int
		err     bool
	}{
		"default 0":                    {regions: 10, want: 0},
		"a count":                      {v: ptrTo(intstr.FromInt32(2)), regions: 10, want: 2},
		"a percentage rounds down":     {v: ptrTo(intstr.FromString("20%")), regions: 9, want: 1},
		"a small percentage is 0":      {v: ptrTo(intstr.FromString("10%")), regions: 5, want: 0},
		"not a number":                 {v: ptrTo(intstr.FromString("some")), regions: 5, err: true},
		"a negative count is refused":  {v: ptrTo(intstr.FromInt32(-1)), regions: 5, err: true},
		"a percentage of every region": {v: ptrTo(intstr.FromString("100%")), regions: 4, want: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := MaxFailures(regionsyncv1alpha1.RolloutStrategy{MaxFailures: tc.v}, tc.regions)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), "spec.strategy.maxFailures") {
					t.Fatalf("error %v, want one naming spec.strategy.maxFailures", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("MaxFailures = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// region states for the decision tables: "name@rev" plus flags: "+" healthy, "!" Failed,
// "-" down, "x" the update revision does not render.
func fleet(specs ...string) []RegionView {
	out := make([]RegionView, 0, len(specs))
	for _, s := range specs {
		v := RegionView{Live: true}
		base := strings.TrimRight(s, "+!-x")
		flags := s[len(base):]
		s = base
		name, rev, _ := strings.Cut(s, "@")
		name, tier, _ := strings.Cut(name, ":")
		v.Name, v.Revision, v.HasObject = name, rev, rev != ""
		v.Labels = map[string]string{"tier": tier}
		v.Healthy = strings.Contains(flags, "+")
		v.Failed = strings.Contains(flags, "!")
		v.Live = !strings.Contains(flags, "-")
		if strings.Contains(flags, "x") {
			v.UpdateFailed = "spec.overrides[0].jsonPatch: does not apply"
		}
		out = append(out, v)
	}
	return out
}

func TestDecideRollout(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-d)} }
	// Waves: a; the canaries (b, c); the rest (d, e).
	progressive := regionsyncv1alpha1.RolloutStrategy{
		Type: regionsyncv1alpha1.RolloutProgressive,
		Waves: []regionsyncv1alpha1.RolloutWave{
			{Name: "first", Regions: []string{"a"}},
			{Name: "canaries", RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
		},
		Soak: &metav1.Duration{Duration: time.Minute}, ProgressDeadline: &metav1.Duration{Duration: 10 * time.Minute},
	}
	with := func(mut func(*regionsyncv1alpha1.RolloutStrategy)) regionsyncv1alpha1.RolloutStrategy {
		s := progressive
		mut(&s)
		return s
	}
	rollback := with(func(s *regionsyncv1alpha1.RolloutStrategy) { s.OnFailure = regionsyncv1alpha1.FailureRollback })
	wave := func(n int32, started, healthy *metav1.Time) *regionsyncv1alpha1.RolloutStatus {
		return &regionsyncv1alpha1.RolloutStatus{CurrentRevision: "S", UpdateRevision: "U", Wave: n, Waves: 3, WaveStartTime: started, WaveHealthyTime: healthy}
	}
	halted := func(rolledBack bool, regions ...string) *regionsyncv1alpha1.RolloutStatus {
		st := wave(1, ago(5*time.Minute), nil)
		st.Halt = &regionsyncv1alpha1.RolloutHalt{Revision: "U", Regions: regions, Reason: regionsyncv1alpha1.ReasonUnhealthy, Since: *ago(2 * time.Minute), RolledBack: rolledBack}
		return st
	}
	type want struct {
		want         string // "a=U b=S ..." in region order
		wave         int32
		current      string
		progressing  string // reason
		halted       string // reason ("" = NotHalted)
		newHalt      bool
		started      []int
		events       []string
		requeueAfter time.Duration
		failed       int32
	}
	cases := map[string]struct {
		strategy regionsyncv1alpha1.RolloutStrategy
		paused   bool
		stable   string
		prev     *regionsyncv1alpha1.RolloutStatus
		retry    time.Time
		regions  []RegionView
		want     want
	}{
		"All: every region at once, complete when every one is healthy": {
			strategy: regionsyncv1alpha1.RolloutStrategy{},
			stable:   "S",
			regions:  fleet("a@U+", "b:canary@S+", "c:canary@U+"),
			want:     want{want: "a=U b=U c=U", current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress},
		},
		"All: healthy everywhere makes the update revision current": {
			strategy: regionsyncv1alpha1.RolloutStrategy{Type: regionsyncv1alpha1.RolloutAll},
			stable:   "S",
			regions:  fleet("a@U+", "b@U+"),
			want:     want{want: "a=U b=U", current: "U", progressing: regionsyncv1alpha1.ReasonRolloutComplete},
		},
		"nothing to roll out": {
			strategy: progressive, stable: "U",
			regions: fleet("a@U+", "b:canary@U+", "d"),
			want:    want{want: "a=U b=U d=U", current: "U", progressing: regionsyncv1alpha1.ReasonWaveInProgress},
		},
		"a new revision starts the first wave only": {
			strategy: progressive, stable: "S",
			prev:    &regionsyncv1alpha1.RolloutStatus{CurrentRevision: "S", UpdateRevision: "S"},
			regions: fleet("a@S+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				started: []int{1}, events: []string{EventWaveStarted}, requeueAfter: 10 * time.Minute},
		},
		"a healthy wave soaks": {
			strategy: progressive, stable: "S", prev: wave(1, ago(2*time.Minute), ago(30*time.Second)),
			regions: fleet("a@U+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonSoaking,
				requeueAfter: 30 * time.Second},
		},
		"a wave just healthy starts its soak now": {
			strategy: progressive, stable: "S", prev: wave(1, ago(2*time.Minute), nil),
			regions: fleet("a@U+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonSoaking,
				requeueAfter: time.Minute},
		},
		"after the soak the next wave starts": {
			strategy: progressive, stable: "S", prev: wave(1, ago(3*time.Minute), ago(time.Minute)),
			regions: fleet("a@U+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=U c=U d=S e=S", wave: 2, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				started: []int{2}, events: []string{EventWaveCompleted, EventWaveStarted}, requeueAfter: 10 * time.Minute},
		},
		"the last wave soaked: complete, the update revision is current": {
			strategy: progressive, stable: "S", prev: wave(3, ago(5*time.Minute), ago(2*time.Minute)),
			regions: fleet("a@U+", "b:canary@U+", "c:canary@U+", "d@U+", "e@U+"),
			want: want{want: "a=U b=U c=U d=U e=U", current: "U", progressing: regionsyncv1alpha1.ReasonRolloutComplete,
				events: []string{EventWaveCompleted, EventRolloutComplete}},
		},
		"a Failed copy halts (maxFailures 0); the updated region keeps the update": {
			strategy: progressive, stable: "S", prev: wave(1, ago(time.Minute), nil),
			regions: fleet("a@U!", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, newHalt: true, events: []string{EventRolloutHalted}, failed: 1},
		},
		"with Rollback the updated regions get the stable revision back": {
			strategy: rollback, stable: "S", prev: wave(1, ago(time.Minute), nil),
			regions: fleet("a@U!", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=S b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolledBack,
				halted: regionsyncv1alpha1.ReasonRolledBack, newHalt: true, events: []string{EventRolloutHalted, EventRolledBack}, failed: 1},
		},
		"a rolled back revision is never applied again by itself": {
			strategy: rollback, stable: "S", prev: halted(true, "a"),
			regions: fleet("a@S+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=S b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolledBack,
				halted: regionsyncv1alpha1.ReasonRolledBack, failed: 1},
		},
		"a halted rollout stays halted, nothing more is written": {
			strategy: progressive, stable: "S", prev: halted(false, "a"),
			regions: fleet("a@U+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, failed: 1},
		},
		"a retry before the halt changes nothing": {
			strategy: rollback, stable: "S", prev: halted(true, "a"), retry: now.Add(-time.Hour),
			regions: fleet("a@S+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=S b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolledBack,
				halted: regionsyncv1alpha1.ReasonRolledBack, failed: 1},
		},
		"a retry after the halt starts again at the first wave": {
			strategy: rollback, stable: "S", prev: halted(true, "a"), retry: now.Add(-time.Minute),
			regions: fleet("a@S+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				started: []int{1}, events: []string{EventRolloutRetried, EventWaveStarted}, requeueAfter: 10 * time.Minute},
		},
		"a new revision after a halt starts at the first wave": {
			strategy: progressive, stable: "S",
			prev: func() *regionsyncv1alpha1.RolloutStatus {
				st := halted(false, "a", "b")
				st.UpdateRevision, st.Halt.Revision, st.Wave = "V", "V", 2
				return st
			}(),
			regions: fleet("a@V!", "b:canary@V!", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=V c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				started: []int{1}, events: []string{EventWaveStarted}, requeueAfter: 10 * time.Minute},
		},
		"a region down when its wave starts is a failure, never skipped": {
			strategy: progressive, stable: "S",
			regions: fleet("a@S+-", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=S b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, newHalt: true, events: []string{EventRolloutHalted}, failed: 1},
		},
		"a region of a completed wave going down counts too": {
			strategy: progressive, stable: "S", prev: wave(2, ago(time.Minute), nil),
			regions: fleet("a@U+-", "b:canary@U", "c:canary@U", "d@S+", "e@S+"),
			want: want{want: "a=U b=U c=U d=S e=S", wave: 2, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, newHalt: true, events: []string{EventRolloutHalted}, failed: 1},
		},
		"maxFailures tolerates as many failures": {
			strategy: with(func(s *regionsyncv1alpha1.RolloutStrategy) { s.MaxFailures = ptrTo(intstr.FromString("20%")) }),
			stable:   "S", prev: wave(2, ago(time.Minute), nil),
			regions: fleet("a@U+", "b:canary@U!", "c:canary@U", "d@S+", "e@S+"),
			want: want{want: "a=U b=U c=U d=S e=S", wave: 2, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				requeueAfter: 9 * time.Minute, failed: 1},
		},
		"one more than maxFailures halts; regions not yet written keep theirs": {
			strategy: with(func(s *regionsyncv1alpha1.RolloutStrategy) { s.MaxFailures = ptrTo(intstr.FromInt32(1)) }),
			stable:   "S", prev: wave(2, ago(time.Minute), nil),
			regions: fleet("a@U!", "b:canary@U!", "c:canary@S", "d@S+", "e@S+"),
			want: want{want: "a=U b=U c=S d=S e=S", wave: 2, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, newHalt: true, events: []string{EventRolloutHalted}, failed: 2},
		},
		"not healthy by the progress deadline is a failure": {
			strategy: progressive, stable: "S", prev: wave(1, ago(10*time.Minute), nil),
			regions: fleet("a@U", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, newHalt: true, events: []string{EventRolloutHalted}, failed: 1},
		},
		"an update that does not render for a region is a failure": {
			strategy: progressive, stable: "S",
			regions: fleet("a@S+x", "b:canary@S+", "d@S+"),
			want: want{want: "a=S b=S d=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonRolloutHalted,
				halted: regionsyncv1alpha1.ReasonRolloutHalted, newHalt: true, events: []string{EventRolloutHalted}, failed: 1},
		},
		"paused: no wave starts": {
			strategy: progressive, paused: true, stable: "S",
			regions: fleet("a@S+", "b:canary@S+", "d@S+"),
			want:    want{want: "a=S b=S d=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonPaused},
		},
		"paused: a soaked wave does not hand over": {
			strategy: progressive, paused: true, stable: "S", prev: wave(1, ago(5*time.Minute), ago(3*time.Minute)),
			regions: fleet("a@U+", "b:canary@S+", "d@S+"),
			want:    want{want: "a=U b=S d=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonPaused},
		},
		"a region joining a completed wave gets the stable revision": {
			strategy: progressive, stable: "S", prev: wave(2, ago(time.Minute), nil),
			regions: fleet("a@U+", "a2", "b:canary@U", "c:canary@U", "d@S+"),
			want: want{want: "a=U a2=S b=U c=U d=S", wave: 2, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				requeueAfter: 9 * time.Minute},
		},
		"the first rollout: regions of later waves wait with nothing": {
			strategy: progressive,
			regions:  fleet("a", "b:canary", "d"),
			want: want{want: "a=U b= d=", wave: 1, progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				started: []int{1}, events: []string{EventWaveStarted}, requeueAfter: 10 * time.Minute},
		},
		"rebuilt from the regions' revisions (a hub taking over without the last status)": {
			strategy: progressive, stable: "S",
			prev:    &regionsyncv1alpha1.RolloutStatus{CurrentRevision: "S", UpdateRevision: "U", Wave: 1, WaveStartTime: ago(5 * time.Minute)},
			regions: fleet("a@U+", "b:canary@U+", "c:canary@U+", "d@S+", "e@S+"),
			want: want{want: "a=U b=U c=U d=S e=S", wave: 2, current: "S", progressing: regionsyncv1alpha1.ReasonSoaking,
				started: []int{2}, events: []string{EventWaveStarted}, requeueAfter: time.Minute},
		},
		// A source's revision changes with the sources; the decision is the same.
		"a source changed again after a rollback: the new revision starts at the first wave": {
			strategy: rollback, stable: "S", prev: func() *regionsyncv1alpha1.RolloutStatus {
				st := halted(true, "a")
				st.UpdateRevision, st.Halt.Revision = "V", "V"
				return st
			}(),
			regions: fleet("a@S+", "b:canary@S+", "c:canary@S+", "d@S+", "e@S+"),
			want: want{want: "a=U b=S c=S d=S e=S", wave: 1, current: "S", progressing: regionsyncv1alpha1.ReasonWaveInProgress,
				started: []int{1}, events: []string{EventWaveStarted}, requeueAfter: 10 * time.Minute},
		},
		"a source that selects nothing renders in no region: complete at once": {
			strategy: progressive, stable: "S", prev: wave(2, ago(time.Minute), nil),
			want: want{want: "", current: "U", progressing: regionsyncv1alpha1.ReasonRolloutComplete, events: []string{EventRolloutComplete}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			stored := map[string]bool{"S": true, "U": true, "V": true}
			p, err := DecideRollout(RolloutInput{
				Strategy: tc.strategy, Paused: tc.paused, Update: "U", Stable: tc.stable,
				Stored: func(r string) bool { return stored[r] }, Previous: tc.prev, RetryAfter: tc.retry,
				Regions: tc.regions, Now: now, RetryKey: testKeys.RetryRollout,
			})
			if err != nil {
				t.Fatal(err)
			}
			var gotWant []string
			for _, r := range tc.regions {
				gotWant = append(gotWant, r.Name+"="+p.Want[r.Name])
			}
			var started []int
			for _, w := range p.StartedWaves {
				started = append(started, w.Number)
			}
			var events []string
			for _, e := range p.Events {
				events = append(events, e.Reason)
			}
			halted := ""
			if p.Halted.Status == metav1.ConditionTrue {
				halted = p.Halted.Reason
			}
			got := want{
				want: strings.Join(gotWant, " "), wave: p.Status.Wave, current: p.Status.CurrentRevision,
				progressing: p.Progressing.Reason, halted: halted, newHalt: p.NewHalt, started: started, events: events,
				requeueAfter: p.RequeueAfter, failed: p.Status.Failed,
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("decision (-want +got):\n%s\nconditions: %+v / %+v", diff, p.Progressing, p.Halted)
			}
			if p.Halted.Status == metav1.ConditionTrue {
				if p.Status.Halt == nil || !strings.Contains(p.Halted.Message, testKeys.RetryRollout) || !strings.Contains(p.Halted.Message, p.Status.Halt.Regions[0]) {
					t.Errorf("Halted %+v, halt %+v: want the regions and the retry annotation named", p.Halted, p.Status.Halt)
				}
			}
		})
	}
}

func TestRevisionsToPrune(t *testing.T) {
	have := map[string]Revision{}
	for i := 1; i <= 13; i++ {
		have[fmt.Sprintf("d-%02d", i)] = Revision{Name: fmt.Sprintf("d-%02d", i), Number: int64(i)}
	}
	got := revisionsToPrune(have, map[string]bool{"d-01": true, "d-03": true}, 10)
	if diff := cmp.Diff([]string{"d-02", "d-04", "d-05"}, got); diff != "" {
		t.Errorf("pruned (-want +got):\n%s", diff)
	}
	if got := revisionsToPrune(map[string]Revision{"a": {Name: "a", Number: 1}}, nil, 10); got != nil {
		t.Errorf("pruned %v of one revision", got)
	}
}

func TestRevisionName(t *testing.T) {
	a := RevisionContent{}
	a.Template.Raw = []byte(`{"kind":"Tenant","spec":{"plan":"team","x":1}}`)
	b := RevisionContent{}
	b.Template.Raw = []byte(`{"spec":{"x":1,"plan":"team"},"kind":"Tenant"}`)
	c := RevisionContent{Overrides: []regionsyncv1alpha1.Override{{Regions: []string{"r"}}}}
	c.Template.Raw = a.Template.Raw
	if RevisionName("d", a) != RevisionName("d", b) {
		t.Errorf("the same content in another key order is another revision: %s, %s", RevisionName("d", a), RevisionName("d", b))
	}
	if RevisionName("d", a) == RevisionName("d", c) || !strings.HasPrefix(RevisionName("d", a), "d-") || len(RevisionName("d", a)) != len("d-")+10 {
		t.Errorf("revision names %s, %s", RevisionName("d", a), RevisionName("d", c))
	}
}

func TestValidateStrategy(t *testing.T) {
	cases := map[string]struct {
		s   regionsyncv1alpha1.RolloutStrategy
		err string
	}{
		"empty":           {},
		"good waves":      {s: regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{{RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}}},
		"a good percent":  {s: regionsyncv1alpha1.RolloutStrategy{MaxConcurrency: ptrTo(intstr.FromString("25%")), MaxFailures: ptrTo(intstr.FromString("5%"))}},
		"a bad selector":  {s: regionsyncv1alpha1.RolloutStrategy{Waves: []regionsyncv1alpha1.RolloutWave{{RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b c"}}}}}, err: "spec.strategy.waves[0].regionSelector"},
		"a bad maxConc":   {s: regionsyncv1alpha1.RolloutStrategy{MaxConcurrency: ptrTo(intstr.FromString("x%"))}, err: "spec.strategy.maxConcurrency"},
		"a bad maxFail":   {s: regionsyncv1alpha1.RolloutStrategy{MaxFailures: ptrTo(intstr.FromString("half"))}, err: "spec.strategy.maxFailures"},
		"negative failed": {s: regionsyncv1alpha1.RolloutStrategy{MaxFailures: ptrTo(intstr.FromInt32(-2))}, err: "spec.strategy.maxFailures"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateStrategy(tc.s)
			if (err != nil) != (tc.err != "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("ValidateStrategy: %v, want an error naming %q", err, tc.err)
			}
		})
	}
}

func TestRegionLive(t *testing.T) {
	cases := map[string]struct {
		ready *metav1.Condition
		want  bool
	}{
		"never reported":    {want: false},
		"Ready":             {ready: &metav1.Condition{Status: metav1.ConditionTrue}, want: true},
		"reporting, not ok": {ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: regionsyncv1alpha1.ReasonNotReady}, want: true},
		"heartbeat missed":  {ready: &metav1.Condition{Status: metav1.ConditionUnknown, Reason: regionsyncv1alpha1.ReasonHeartbeatMissed}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := &regionsyncv1alpha1.Region{}
			if tc.ready != nil {
				c := *tc.ready
				c.Type, c.Reason = regionsyncv1alpha1.ConditionReady, cmpOrReason(c.Reason)
				r.Status.Conditions = []metav1.Condition{c}
			}
			if got := RegionLive(r); got != tc.want {
				t.Errorf("RegionLive = %v, want %v", got, tc.want)
			}
		})
	}
}

func cmpOrReason(r string) string {
	if r == "" {
		return regionsyncv1alpha1.ReasonReady
	}
	return r
}

func TestRolloutMilestone(t *testing.T) {
	at := &metav1.Time{Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	base := regionsyncv1alpha1.RolloutStatus{CurrentRevision: "S", UpdateRevision: "U", Wave: 1, Updated: 1}
	cases := map[string]struct {
		before, mutate func(*regionsyncv1alpha1.RolloutStatus)
		want           bool
	}{
		"counts only": {mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.Updated, s.Healthy = 2, 1 }},
		"soak starts": {mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.WaveHealthyTime = at }, want: true},
		"soak lost (a region unhealthy again)": {before: func(s *regionsyncv1alpha1.RolloutStatus) { s.WaveHealthyTime = at },
			mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.WaveHealthyTime = nil }, want: true},
		"soak going on": {before: func(s *regionsyncv1alpha1.RolloutStatus) { s.WaveHealthyTime = at },
			mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.WaveHealthyTime, s.Healthy = at.DeepCopy(), 1 }},
		"the next wave":  {mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.Wave = 2 }, want: true},
		"a new revision": {mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.UpdateRevision = "V" }, want: true},
		"complete":       {mutate: func(s *regionsyncv1alpha1.RolloutStatus) { s.CurrentRevision, s.Wave = "U", 0 }, want: true},
		"halted": {mutate: func(s *regionsyncv1alpha1.RolloutStatus) {
			s.Halt = &regionsyncv1alpha1.RolloutHalt{Revision: "U", Since: *at}
		}, want: true},
		"no rollout before":  {want: true},
		"nothing at all new": {mutate: func(*regionsyncv1alpha1.RolloutStatus) {}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := &regionsyncv1alpha1.DistributionStatus{Rollout: base.DeepCopy()}
			if tc.before != nil {
				tc.before(old.Rollout)
			}
			if tc.mutate == nil {
				old.Rollout = nil
			}
			updated := &regionsyncv1alpha1.DistributionStatus{Rollout: old.Rollout.DeepCopy()}
			if updated.Rollout == nil {
				updated.Rollout = base.DeepCopy()
			}
			if tc.mutate != nil {
				tc.mutate(updated.Rollout)
			}
			if got := rolloutMilestone(old, updated); got != tc.want {
				t.Errorf("rolloutMilestone = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRevisionContentStored(t *testing.T) {
	secret := RevisionContent{Overrides: []regionsyncv1alpha1.Override{{Regions: []string{"r"}}}}
	secret.Template.Raw = []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"labels":{"a":"b"}},"data":{"token":"c2VjcmV0LXZhbHVl"},"stringData":{"password":"hunter2"}}`)
	got := secret.Stored()
	raw := string(got.Template.Raw)
	if !got.Redacted || got.Overrides != nil || strings.Contains(raw, "c2VjcmV0LXZhbHVl") || strings.Contains(raw, "hunter2") || !strings.Contains(raw, `"sha256"`) || !strings.Contains(raw, `"labels":{"a":"b"}`) {
		t.Errorf("a Secret's stored revision: %s (redacted %v, overrides %v)", raw, got.Redacted, got.Overrides)
	}
	other := secret
	other.Template.Raw = []byte(`{"apiVersion":"v1","kind":"Secret","data":{"token":"b3RoZXI="}}`)
	if RevisionName("d", secret) == RevisionName("d", other) {
		t.Error("two Secrets with other data are one revision")
	}
	tenant := RevisionContent{}
	tenant.Template.Raw = []byte(tenantJSON)
	if s := tenant.Stored(); s.Redacted || string(s.Template.Raw) != tenantJSON {
		t.Errorf("a Tenant's stored revision changed: %s", s.Template.Raw)
	}
}

func TestSetRolloutStatus(t *testing.T) {
	d := &regionsyncv1alpha1.Distribution{}
	d.Generation = 4
	d.Status.Rollout = &regionsyncv1alpha1.RolloutStatus{UpdateRevision: "U", Halt: &regionsyncv1alpha1.RolloutHalt{Revision: "U", Reason: regionsyncv1alpha1.ReasonUnhealthy}}
	// Nothing decided (an invalid spec): the rollout's status, and its halt, stay.
	st := regionsyncv1alpha1.DistributionStatus{}
	setRolloutStatus(&st, d, nil)
	if st.Rollout == nil || st.Rollout.Halt == nil || st.Rollout == d.Status.Rollout {
		t.Fatalf("without an outcome: %+v, want a copy of %+v", st.Rollout, d.Status.Rollout)
	}
	out := &RolloutOutcome{
		Status:      regionsyncv1alpha1.RolloutStatus{UpdateRevision: "V", Wave: 1},
		Progressing: Condition{metav1.ConditionTrue, regionsyncv1alpha1.ReasonWaveInProgress, "wave 1"},
		Halted:      notHalted,
	}
	setRolloutStatus(&st, d, out)
	p, h := meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionProgressing), meta.FindStatusCondition(st.Conditions, regionsyncv1alpha1.DistributionHalted)
	if st.Rollout.UpdateRevision != "V" || st.Rollout.Halt != nil || p == nil || p.Status != metav1.ConditionTrue || p.ObservedGeneration != 4 || h == nil || h.Status != metav1.ConditionFalse {
		t.Errorf("status %+v, Progressing %+v, Halted %+v", st.Rollout, p, h)
	}
}

// FuzzDecideRollout checks the rules that hold whatever the regions' states: every region is
// decided; a halt writes the update revision to no region that lacks it (after a rollback to
// none); a paused rollout writes it to no region that lacks it; no region past the wave in
// progress newly gets it.
func FuzzDecideRollout(f *testing.F) {
	f.Add([]byte{0x01, 0x12, 0x23, 0x34, 0x45}, uint8(0), false, uint8(0))
	f.Add([]byte{0x0f, 0x1e, 0x2d}, uint8(2), true, uint8(1))
	f.Add([]byte{0xff, 0x00, 0x81, 0x42, 0x24, 0x18}, uint8(3), false, uint8(2))
	f.Fuzz(func(t *testing.T, states []byte, prevWave uint8, paused bool, mode uint8) {
		if len(states) > 12 {
			states = states[:12]
		}
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		revs := []string{"", "S", "U", "X"}
		regions := make([]RegionView, 0, len(states))
		for i, b := range states {
			regions = append(regions, RegionView{
				Name: fmt.Sprintf("r%02d", i), Labels: map[string]string{"tier": []string{"canary", "prod"}[b>>7&1]},
				Revision: revs[b&3], HasObject: b&3 != 0, Healthy: b&4 != 0, Failed: b&8 != 0, Live: b&16 == 0,
			})
			if b&32 != 0 && b&64 != 0 {
				regions[i].UpdateFailed = "does not render"
			}
		}
		s := regionsyncv1alpha1.RolloutStrategy{
			Type: regionsyncv1alpha1.RolloutProgressive, Soak: &metav1.Duration{Duration: time.Minute},
			Waves:     []regionsyncv1alpha1.RolloutWave{{Regions: []string{"r00"}}, {RegionSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}}},
			OnFailure: []regionsyncv1alpha1.FailureAction{regionsyncv1alpha1.FailureHalt, regionsyncv1alpha1.FailureRollback}[mode&1],
		}
		if mode&2 != 0 {
			s.Waves, s.MaxConcurrency = nil, ptrTo(intstr.FromInt32(int32(mode%4+1)))
		}
		var prev *regionsyncv1alpha1.RolloutStatus
		if prevWave > 0 {
			prev = &regionsyncv1alpha1.RolloutStatus{CurrentRevision: "S", UpdateRevision: "U", Wave: int32(prevWave % 5),
				WaveStartTime: &metav1.Time{Time: now.Add(-time.Duration(prevWave) * time.Minute)}, WaveHealthyTime: &metav1.Time{Time: now.Add(-2 * time.Minute)}}
			if mode&4 != 0 {
				prev.Halt = &regionsyncv1alpha1.RolloutHalt{Revision: "U", Since: metav1.Time{Time: now.Add(-time.Minute)}, RolledBack: mode&1 != 0}
			}
		}
		p, err := DecideRollout(RolloutInput{
			Strategy: s, Paused: paused, Update: "U", Stable: "S", Stored: func(r string) bool { return r != "" },
			Previous: prev, Regions: regions, Now: now, RetryKey: testKeys.RetryRollout,
		})
		if err != nil {
			t.Fatal(err)
		}
		waves, _ := AssignWaves(s, regions)
		waveOf := map[string]int{}
		for i, w := range waves {
			for _, n := range w.Regions {
				waveOf[n] = i + 1
			}
		}
		complete := p.Status.CurrentRevision == "U"
		for _, r := range regions {
			got, ok := p.Want[r.Name]
			if !ok {
				t.Fatalf("%s undecided", r.Name)
			}
			newly := got == "U" && r.Revision != "U"
			switch {
			case p.Status.Halt != nil && p.Status.Halt.RolledBack && got == "U":
				t.Fatalf("rolled back, yet %s gets U: %+v", r.Name, p)
			case p.Status.Halt != nil && newly:
				t.Fatalf("halted, yet %s newly gets U", r.Name)
			case paused && newly && !complete:
				t.Fatalf("paused, yet %s newly gets U", r.Name)
			case !complete && newly && waveOf[r.Name] > int(p.Status.Wave):
				t.Fatalf("%s of wave %d newly gets U while wave %d is in progress", r.Name, waveOf[r.Name], p.Status.Wave)
			}
		}
		if int(p.Status.Failed) > len(regions) || int(p.Status.Updated) > len(regions) || p.Status.Healthy > p.Status.Updated {
			t.Fatalf("counts %+v", p.Status)
		}
	})
}

func TestWithWrittenHalt(t *testing.T) {
	since := metav1.Time{Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	written := regionsyncv1alpha1.RolloutStatus{UpdateRevision: "U", Wave: 1, Halt: &regionsyncv1alpha1.RolloutHalt{Revision: "U", Since: since, RolledBack: true}}
	stale := &regionsyncv1alpha1.RolloutStatus{UpdateRevision: "U", Wave: 1}
	cases := map[string]struct {
		generation int64
		retry      string
		cached     *regionsyncv1alpha1.RolloutStatus
		wantHalt   bool
		forgotten  bool
	}{
		"a stale cache reads the halt written":       {generation: 3, cached: stale, wantHalt: true},
		"no cached rollout at all reads it too":      {generation: 3, wantHalt: true},
		"the cache caught up":                        {generation: 3, cached: &written, wantHalt: true, forgotten: true},
		"the spec changed since":                     {generation: 4, cached: stale, forgotten: true},
		"a retry after the halt":                     {generation: 3, cached: stale, retry: "2026-05-01T12:00:01Z", forgotten: true},
		"a retry from before the halt: still halted": {generation: 3, cached: stale, retry: "2026-05-01T11:00:00Z", wantHalt: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			key := types.NamespacedName{Namespace: "ns", Name: "d"}
			r := &DistributionReconciler{Keys: testKeys, haltsWritten: map[types.NamespacedName]writtenHalt{key: {generation: 3, status: written}}}
			d := &regionsyncv1alpha1.Distribution{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", Generation: tc.generation}}
			if tc.retry != "" {
				d.Annotations = map[string]string{testKeys.RetryRollout: tc.retry}
			}
			got := r.withWrittenHalt(d, tc.cached)
			if (got != nil && got.Halt != nil) != tc.wantHalt {
				t.Errorf("status %+v, want a halt: %v", got, tc.wantHalt)
			}
			if _, ok := r.haltsWritten[key]; ok == tc.forgotten {
				t.Errorf("remembered %v, want forgotten %v", ok, tc.forgotten)
			}
		})
	}
}

// TestRegionRevision: a region's revision and health for a rollout are judged over all its
// per-region objects (one per source object), from what is written on them.
func TestRegionRevision(t *testing.T) {
	have := map[string]Revision{"R": {Name: "R", Number: 1}, "S": {Name: "S", Number: 2}, "U": {Name: "U", Number: 3}}
	rule, err := CompileHealthRule(&regionsyncv1alpha1.HealthRule{Current: "true", Failed: "object.data.color == 'bad'"})
	if err != nil {
		t.Fatal(err)
	}
	// obj is the per-region ConfigMap name-us on revision rev; synced: its region's agent copied
	// this content (current).
	obj := func(name, rev, color string, synced bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name + "-us", "namespace": "tenant-acme"},
			"data":     map[string]any{"color": color},
		}}
		a := map[string]string{}
		if rev != "" {
			a[testKeys.Revision] = rev
		}
		u.SetAnnotations(a)
		if synced {
			a[testKeys.RemoteGeneration], a[testKeys.LocalGeneration] = "0", "0"
			a[testKeys.AppliedHash] = testKeys.AppliedContentHash(u)
			u.SetAnnotations(a)
		}
		return u
	}
	objs := func(o ...*unstructured.Unstructured) []*unstructured.Unstructured { return o }
	cases := map[string]struct {
		objs    []*unstructured.Unstructured
		names   []string // what the update renders in the region
		rev     string
		healthy bool
		failed  bool
	}{
		"no object yet":                  {names: []string{"a-us"}},
		"a template's object, healthy":   {objs: objs(obj("a", "U", "blue", true)), names: []string{"a-us"}, rev: "U", healthy: true},
		"every source object healthy":    {objs: objs(obj("a", "U", "blue", true), obj("b", "U", "green", true)), names: []string{"a-us", "b-us"}, rev: "U", healthy: true},
		"partly written: on the update":  {objs: objs(obj("a", "U", "blue", true), obj("b", "S", "green", true)), names: []string{"a-us", "b-us"}, rev: "U"},
		"on the stable revision":         {objs: objs(obj("a", "S", "blue", true), obj("b", "S", "green", true)), names: []string{"a-us", "b-us"}, rev: "S"},
		"a source added, not yet placed": {objs: objs(obj("a", "U", "blue", true)), names: []string{"a-us", "c-us"}, rev: "U"},
		"a copy not current yet":         {objs: objs(obj("a", "U", "blue", true), obj("b", "U", "green", false)), names: []string{"a-us", "b-us"}, rev: "U"},
		"a source removed, its removal held: not counted": {
			objs: objs(obj("a", "U", "blue", true), obj("b", "S", "bad", true)), names: []string{"a-us"}, rev: "U", healthy: true,
		},
		"a copy of the update reports Failed": {objs: objs(obj("a", "U", "blue", true), obj("b", "U", "bad", true)), names: []string{"a-us", "b-us"}, rev: "U", failed: true},
		"a Failed copy of the stable revision": {
			objs: objs(obj("a", "S", "bad", true), obj("b", "S", "green", true)), names: []string{"a-us", "b-us"}, rev: "S", failed: true,
		},
		"revisions not stored are none":         {objs: objs(obj("a", "gone", "blue", true), obj("b", "", "green", true)), names: []string{"a-us", "b-us"}},
		"two older revisions: the newest":       {objs: objs(obj("a", "R", "blue", true), obj("b", "S", "green", true)), names: []string{"a-us", "b-us"}, rev: "S"},
		"nothing rendered there is not healthy": {objs: objs(obj("a", "U", "blue", true)), rev: "U"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rev, healthy, failed := regionRevision(tc.objs, tc.names, have, "U", testKeys, rule)
			if rev != tc.rev || healthy != tc.healthy || failed != tc.failed {
				t.Errorf("regionRevision = %q, healthy %v, failed %v; want %q, %v, %v", rev, healthy, failed, tc.rev, tc.healthy, tc.failed)
			}
		})
	}
}

// TestSoakSurvivesTheStatusRoundTrip walks a wave's soak through decisions whose previous status
// went through JSON (second precision), at fractional times: the next wave never starts before
// the soak has passed since every region of the wave was first seen healthy, and the times the
// status keeps are the ones the decision used.
func TestSoakSurvivesTheStatusRoundTrip(t *testing.T) {
	soak := 3 * time.Second
	s := regionsyncv1alpha1.RolloutStrategy{
		Type:  regionsyncv1alpha1.RolloutProgressive,
		Waves: []regionsyncv1alpha1.RolloutWave{{Name: "first", Regions: []string{"a"}}},
		Soak:  &metav1.Duration{Duration: soak},
	}
	roundTrip := func(st regionsyncv1alpha1.RolloutStatus) *regionsyncv1alpha1.RolloutStatus {
		raw, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		out := &regionsyncv1alpha1.RolloutStatus{}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, frac := range []time.Duration{0, time.Millisecond, 400 * time.Millisecond, 999 * time.Millisecond} {
		t.Run(frac.String(), func(t *testing.T) {
			start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).Add(frac)
			decide := func(now time.Time, prev *regionsyncv1alpha1.RolloutStatus, regions []RegionView) RolloutPlan {
				p, err := DecideRollout(RolloutInput{
					Strategy: s, Update: "U", Stable: "S", Stored: func(r string) bool { return r != "" },
					Previous: prev, Regions: regions, Now: now, RetryKey: testKeys.RetryRollout,
				})
				if err != nil {
					t.Fatal(err)
				}
				if prev != nil && p.Status.Wave == prev.Wave && p.Status.WaveStartTime != nil && !p.Status.WaveStartTime.Equal(prev.WaveStartTime) {
					t.Errorf("at %s: wave start moved from %s to %s", now, prev.WaveStartTime, p.Status.WaveStartTime)
				}
				return p
			}
			p := decide(start, nil, fleet("a@S+", "b@S+"))
			if p.Want["a"] != "U" || p.Want["b"] != "S" || p.Status.Wave != 1 {
				t.Fatalf("first decision: want %v, wave %d", p.Want, p.Status.Wave)
			}
			prev := roundTrip(p.Status)
			healthyAt := start.Add(700 * time.Millisecond) // a is first seen healthy on U
			p = decide(healthyAt, prev, fleet("a@U+", "b@S+"))
			if p.Status.WaveHealthyTime == nil || p.Status.WaveHealthyTime.Time.Before(healthyAt) {
				t.Fatalf("soak started at %v, before the wave was healthy at %s", p.Status.WaveHealthyTime, healthyAt)
			}
			if end := healthyAt.Add(p.RequeueAfter); end.Before(healthyAt.Add(soak)) {
				t.Errorf("requeued for %s, before the soak ends", end)
			}
			prev = roundTrip(p.Status)
			for at := healthyAt; at.Before(healthyAt.Add(soak)); at = at.Add(100 * time.Millisecond) {
				if p := decide(at, prev, fleet("a@U+", "b@S+")); p.Want["b"] == "U" {
					t.Fatalf("b updated at %s, %s after a was healthy (soak %s)", at, at.Sub(healthyAt), soak)
				}
			}
			if p := decide(healthyAt.Add(soak+time.Second), prev, fleet("a@U+", "b@S+")); p.Want["b"] != "U" {
				t.Errorf("b not updated a second after the soak: want %v, progressing %+v", p.Want, p.Progressing)
			}
		})
	}
}

// TestSourceRevisionContent: a source revision holds the source objects as placed, sorted by name,
// and the overrides; it renders them back as they were; any change of a source object's
// content, and a source added or removed, is another revision; a Secret's data is stored as
// hashes only. A template revision's name is as it always was (existing revisions keep theirs).
func TestSourceRevisionContent(t *testing.T) {
	d := &regionsyncv1alpha1.Distribution{}
	d.Name = "web"
	d.Spec.Source = &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{}}
	d.Spec.Overrides = []regionsyncv1alpha1.Override{{Regions: []string{"eu"}, MergePatch: &apiextensionsv1.JSON{Raw: []byte(`{"data":{"zone":"eu"}}`)}}}
	cm := func(name, color string) *Template {
		return fromSource(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": "tenant-acme", "labels": map[string]any{"distribute": "web"}, "resourceVersion": "7"},
			"data":     map[string]any{"color": color},
		}})
	}
	widget := fromSource(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.regionsync.dev/v1alpha1", "kind": "Tenant",
		"metadata": map[string]any{"name": "shop", "namespace": "tenant-acme"},
		"spec":     map[string]any{"plan": "team", "replicas": int64(2)},
	}})
	content := func(items ...*Template) RevisionContent {
		t.Helper()
		c, err := contentOf(d, items)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := content(cm("web-b", "green"), cm("web-a", "blue"))
	if !c.Source || len(c.Objects) != 2 || c.Objects[0].Name != "web-a" || c.Objects[1].Name != "web-b" || len(c.Overrides) != 1 {
		t.Fatalf("content %+v", c)
	}
	if strings.Contains(string(c.Objects[0].Object.Raw), "resourceVersion") {
		t.Errorf("a source object's metadata beyond labels and annotations is in the revision: %s", c.Objects[0].Object.Raw)
	}
	items, err := content(widget, cm("web-a", "blue")).Items(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 2 || items[0].Name != "shop" || items[0].GVK.Kind != "Tenant" || items[0].Field != "spec.source" ||
		!cmp.Equal(items[0].Object, widget.Object) || !cmp.Equal(items[1].Object, cm("web-a", "blue").Object) {
		t.Errorf("rendered back: %+v, want %+v", items, widget)
	}
	same := RevisionName("web", c)
	for name, other := range map[string]RevisionContent{
		"a source changed": content(cm("web-a", "blue"), cm("web-b", "bad")),
		"a source added":   content(cm("web-a", "blue"), cm("web-b", "green"), cm("web-c", "red")),
		"a source removed": content(cm("web-a", "blue")),
		"no source":        content(),
	} {
		if RevisionName("web", other) == same {
			t.Errorf("%s: the same revision %s", name, same)
		}
	}
	if got := RevisionName("web", content(cm("web-a", "blue"), cm("web-b", "green"))); got != same {
		t.Errorf("the same sources in another order: %s, want %s", got, same)
	}
	if s := c.Stored(); s.Redacted || !cmp.Equal(s, c) {
		t.Errorf("ConfigMaps stored as %+v, want as they are", s)
	}
	secret := fromSource(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "token"},
		"data": map[string]any{"token": "c2VjcmV0LXZhbHVl"},
	}})
	s := content(cm("web-a", "blue"), secret).Stored()
	if !s.Redacted || s.Overrides != nil || len(s.Objects) != 2 || s.Objects[0].Name != "token" || strings.Contains(string(s.Objects[0].Object.Raw), "c2VjcmV0LXZhbHVl") || !strings.Contains(string(s.Objects[0].Object.Raw), "sha256") {
		t.Errorf("a Secret source stored as %+v", s)
	}
	// A template revision is named as before source revisions existed.
	tmpl := RevisionContent{}
	tmpl.Template.Raw = []byte(tenantJSON)
	if got := RevisionName("shop", tmpl); got != "shop-a677521a04" {
		t.Errorf("template revision name %s", got)
	}
}

// TestRenderSourceRevisions: each region's objects are rendered from the revision the decision
// wants for it: the update revision from the sources as they are now, another from its stored
// content (a rollback writes the previous content although the sources hold the bad one, and a
// source removed since is still in it); a region waiting for its wave, on a revision that places
// nothing there, or on a revision holding no secret data, gets one Pending target (it keeps what
// it has).
func TestRenderSourceRevisions(t *testing.T) {
	r := &DistributionReconciler{Keys: testKeys}
	regions := make([]regionsyncv1alpha1.Region, 0, 5)
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		rg := testRegion(n, "-"+n, nil)
		rg.Spec.Shard.Kinds = []string{"ConfigMap"}
		regions = append(regions, rg)
	}
	d := sourceDist("web", &regionsyncv1alpha1.DistributionSource{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{}}, "")
	cm := func(name, color string) *Template {
		return fromSource(&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": map[string]any{"color": color},
		}})
	}
	content := func(items ...*Template) RevisionContent {
		c, err := contentOf(d, items)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	now := []*Template{cm("web-a", "bad"), cm("web-b", "green")} // what the sources hold
	have := map[string]Revision{
		"S": {Name: "S", Number: 1, Content: content(cm("web-a", "blue"), cm("web-b", "green"), cm("web-old", "red"))},
		"E": {Name: "E", Number: 2, Content: content()},
		"X": {Name: "X", Number: 3, Content: RevisionContent{Source: true, Redacted: true}},
		"U": {Name: "U", Number: 4, Content: content(now...)},
	}
	placed := placeAll(RenderingOf(d), now, []string{"a", "b", "c", "d", "e"}, regions, testKeys)
	targets := r.renderRevisions(d, configMapGVK, placed, map[string]string{"a": "U", "b": "S", "c": "", "d": "E", "e": "X"}, have["U"], have, regions, nil, nil)
	var got []string
	for _, tg := range targets {
		if tg.Object == nil {
			got = append(got, tg.Region+":"+string(tg.State))
			continue
		}
		color, _, _ := unstructured.NestedString(tg.Object.Object, "data", "color")
		got = append(got, tg.Object.GetName()+"="+color+"@"+tg.Object.GetAnnotations()[testKeys.Revision])
	}
	want := []string{
		"web-a-a=bad@U", "web-b-a=green@U",
		"web-a-b=blue@S", "web-b-b=green@S", "web-old-b=red@S",
		"c:Pending", "d:Pending", "e:Pending",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rendered (-want +got):\n%s", diff)
	}
}
