package bench

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The rollout figure's arithmetic over what its watches saw (pure: no API server; these run in
// make test and make test-unit, the figure itself only in make bench).

// copyObs is one observation of a Distribution's per-region object (on management) or of its
// copy (in the region): when it arrived and what it held.
type copyObs struct {
	at       time.Time
	region   string
	plan     string
	revision string // the object's D/revision (management objects only)
	// stalled: the status reports Stalled=True for the object's current spec (as uploaded, on
	// management; as the operator wrote it, in the region).
	stalled bool
}

// distObs is one observation of the Distribution's status.
type distObs struct {
	at               time.Time
	update, current  string // status.rollout's update and current (stable) revisions
	wave             int32
	progressing      string // the Progressing condition's reason
	halted           bool   // Halted=True
	degraded         bool   // Degraded=True
	rolledBack       bool   // status.rollout.halt.rolledBack
	haltedRevision   string // status.rollout.halt.revision
	updated, healthy int32
}

// rolloutWaves cuts the regions (in order) into the figure's waves: a canary of one region (5 %
// of 20), an early wave of a fifth of the regions (at least one), and the rest. Fewer than three
// regions make fewer waves; none is empty.
func rolloutWaves(regions []string) [][]string {
	var waves [][]string
	rest := regions
	for _, size := range []int{1, max(1, len(regions)/5)} {
		if len(rest) <= size {
			break
		}
		waves = append(waves, rest[:size])
		rest = rest[size:]
	}
	if len(rest) > 0 {
		waves = append(waves, rest)
	}
	return waves
}

// firstWith returns when the first observation at or after from of any of the regions held the
// plan (false when none did).
func firstWith(obs []copyObs, regions []string, plan string, from time.Time) (time.Time, bool) {
	var first time.Time
	for _, o := range obs {
		if o.plan != plan || o.at.Before(from) || !slices.Contains(regions, o.region) {
			continue
		}
		if first.IsZero() || o.at.Before(first) {
			first = o.at
		}
	}
	return first, !first.IsZero()
}

// waveStarts returns when each wave started: its first region observed with the plan from from
// on. It fails naming the first wave none of whose regions was seen with it.
func waveStarts(obs []copyObs, waves [][]string, plan string, from time.Time) ([]time.Time, error) {
	starts := make([]time.Time, 0, len(waves))
	for i, w := range waves {
		at, ok := firstWith(obs, w, plan, from)
		if !ok {
			return starts, fmt.Errorf("wave %d (%d regions) was never seen with plan %q", i+1, len(w), plan)
		}
		starts = append(starts, at)
	}
	return starts, nil
}

// waveOverheads returns, per wave, how much longer than the soak it lasted: from its start to the
// next wave's start, the last one to end (the rollout complete). A wave that lasted less than the
// soak (which the rollout rules forbid) shows as a negative overhead.
func waveOverheads(starts []time.Time, end time.Time, soak time.Duration) []time.Duration {
	out := make([]time.Duration, len(starts))
	for i, s := range starts {
		next := end
		if i+1 < len(starts) {
			next = starts[i+1]
		}
		out[i] = next.Sub(s) - soak
	}
	return out
}

// regionsEverWith lists, sorted, the regions observed with the plan at or after from.
func regionsEverWith(obs []copyObs, plan string, from time.Time) []string {
	var out []string
	for _, o := range obs {
		if o.plan == plan && !o.at.Before(from) && !slices.Contains(out, o.region) {
			out = append(out, o.region)
		}
	}
	slices.Sort(out)
	return out
}

// firstStalled returns the first observation at or after from of an object with the plan whose
// status reports Stalled.
func firstStalled(obs []copyObs, plan string, from time.Time) (time.Time, bool) {
	var first time.Time
	for _, o := range obs {
		if o.plan == plan && o.stalled && !o.at.Before(from) && (first.IsZero() || o.at.Before(first)) {
			first = o.at
		}
	}
	return first, !first.IsZero()
}

// allBack returns when the last of the regions was first observed with the plan at or after
// from, and the regions that were not (nil when every one was).
func allBack(obs []copyObs, regions []string, plan string, from time.Time) (time.Time, []string) {
	var last time.Time
	var missing []string
	for _, r := range regions {
		at, ok := firstWith(obs, []string{r}, plan, from)
		if !ok {
			missing = append(missing, r)
			continue
		}
		if at.After(last) {
			last = at
		}
	}
	return last, missing
}

// firstDist returns the first observation of the Distribution at or after from that satisfies ok.
func firstDist(obs []distObs, from time.Time, ok func(distObs) bool) (distObs, bool) {
	for _, o := range obs {
		if !o.at.Before(from) && ok(o) {
			return o, true
		}
	}
	return distObs{}, false
}

func TestRolloutWaves(t *testing.T) {
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("r%02d", i)
		}
		return out
	}
	sizes := func(w [][]string) []int {
		out := make([]int, 0, len(w))
		for _, x := range w {
			out = append(out, len(x))
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{0, nil}, {1, []int{1}}, {2, []int{1, 1}}, {3, []int{1, 1, 1}}, {10, []int{1, 2, 7}},
		{20, []int{1, 4, 15}}, {100, []int{1, 20, 79}},
	} {
		regions := names(tc.n)
		w := rolloutWaves(regions)
		if got := sizes(w); !slices.Equal(got, tc.want) {
			t.Errorf("%d regions: wave sizes %v, want %v", tc.n, got, tc.want)
		}
		if got := slices.Concat(w...); !slices.Equal(got, regions) && tc.n > 0 {
			t.Errorf("%d regions: waves %v do not cover the regions in order", tc.n, w)
		}
	}
}

func TestRolloutObservations(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	obs := []copyObs{
		{at: at(-5), region: "a", plan: "team"}, // before the change: ignored
		{at: at(1), region: "a", plan: "team"},
		{at: at(12), region: "b", plan: "team"},
		{at: at(12.5), region: "c", plan: "team"},
		{at: at(11.8), region: "c", plan: "free"},
		{at: at(24), region: "d", plan: "team"},
		{at: at(30), region: "a", plan: "bad", stalled: false},
		{at: at(31), region: "a", plan: "bad", stalled: true},
		{at: at(33), region: "a", plan: "team"},
	}
	waves := [][]string{{"a"}, {"b", "c"}, {"d"}}
	starts, err := waveStarts(obs, waves, "team", t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := []time.Time{at(1), at(12), at(24)}; !slices.Equal(starts, want) {
		t.Errorf("wave starts %v, want %v", starts, want)
	}
	over := waveOverheads(starts, at(36), 10*time.Second)
	if want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}; !slices.Equal(over, want) {
		t.Errorf("overheads %v, want %v", over, want)
	}
	if _, err := waveStarts(obs, [][]string{{"a"}, {"e"}}, "team", t0); err == nil {
		t.Error("a wave never seen: no error")
	}
	if got := regionsEverWith(obs, "bad", t0); !slices.Equal(got, []string{"a"}) {
		t.Errorf("regions with the bad plan %v, want [a]", got)
	}
	if got := regionsEverWith(obs, "team", at(2)); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("regions with team from 2 s %v", got)
	}
	if got, ok := firstStalled(obs, "bad", t0); !ok || !got.Equal(at(31)) {
		t.Errorf("first stalled %v %v, want 31 s", got, ok)
	}
	if _, ok := firstStalled(obs, "team", t0); ok {
		t.Error("team never stalled")
	}
	if got, missing := allBack(obs, []string{"a"}, "team", at(32)); len(missing) > 0 || !got.Equal(at(33)) {
		t.Errorf("back %v (missing %v), want 33 s", got, missing)
	}
	if _, missing := allBack(obs, []string{"a", "b"}, "team", at(32)); !slices.Equal(missing, []string{"b"}) {
		t.Errorf("missing %v, want [b]", missing)
	}
	dist := []distObs{{at: at(1)}, {at: at(5), halted: true}, {at: at(9), halted: true, rolledBack: true}}
	if o, ok := firstDist(dist, at(2), func(o distObs) bool { return o.halted }); !ok || !o.at.Equal(at(5)) {
		t.Errorf("first halted %v %v, want 5 s", o.at, ok)
	}
	if _, ok := firstDist(dist, at(10), func(o distObs) bool { return o.halted }); ok {
		t.Error("nothing after 10 s")
	}
}
