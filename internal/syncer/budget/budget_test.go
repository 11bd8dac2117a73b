package budget

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestDeletionBudgetAllows(t *testing.T) {
	cases := map[string]struct {
		budget                Budget
		doomed, granted, live int
		want                  bool
	}{
		"none doomed":                   {Budget{MaxFraction: 0.5, MinObjects: 10}, 0, 0, 1000, true},
		"one routine deletion":          {Budget{MaxFraction: 0.5, MinObjects: 10}, 1, 0, 1000, true},
		"single copy may go":            {Budget{MaxFraction: 0.5, MinObjects: 10}, 1, 0, 1, true},
		"small kind vanishing held":     {Budget{MaxFraction: 0.5, MinObjects: 10}, 4, 0, 4, false},
		"two copies vanishing held":     {Budget{MaxFraction: 1, MinObjects: 10}, 2, 0, 2, false},
		"small kind, part doomed":       {Budget{MaxFraction: 0.5, MinObjects: 10}, 3, 0, 4, true},
		"at the fraction":               {Budget{MaxFraction: 0.5}, 50, 0, 100, true},
		"beyond the fraction":           {Budget{MaxFraction: 0.5}, 51, 0, 100, false},
		"window fills the budget":       {Budget{MaxFraction: 0.5}, 1, 50, 50, false},
		"window leaves room":            {Budget{MaxFraction: 0.5}, 1, 49, 51, true},
		"minimum dominates":             {Budget{MaxFraction: 0.01, MinObjects: 10}, 10, 0, 100, true},
		"minimum counts the window too": {Budget{MaxFraction: 0.01, MinObjects: 10}, 1, 10, 90, false},
		"fraction one, all but one":     {Budget{MaxFraction: 1}, 99, 0, 100, true},
		"fraction one, everything":      {Budget{MaxFraction: 1}, 100, 0, 100, false},
	}
	for name, tc := range cases {
		if got := tc.budget.Allows(tc.doomed, tc.granted, tc.live); got != tc.want {
			t.Errorf("%s: Allows(doomed %d, granted %d, live %d) = %v", name, tc.doomed, tc.granted, tc.live, got)
		}
	}
}

// fakeKind is a kind's copies for the gate: live copies, and which remote keys are doomed.
type fakeKind struct {
	live   int
	doomed map[string]bool
	counts int
	err    error
}

func (f *fakeKind) census(context.Context) (Census, error) {
	f.counts++
	c := Census{Live: f.live, Doomed: map[types.NamespacedName]types.NamespacedName{}}
	for k, d := range f.doomed {
		if d {
			c.Doomed[key(k)] = types.NamespacedName{Namespace: "local", Name: k}
		}
	}
	return c, f.err
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// gateRun drives a gate on a fake clock.
type gateRun struct {
	t       *testing.T
	g       *Ledger
	kind    *fakeKind
	now     time.Time
	release time.Time
	reads   int
}

func newGateRun(t *testing.T, b Budget, live int) *gateRun {
	r := &gateRun{t: t, kind: &fakeKind{live: live, doomed: map[string]bool{}}, now: time.Unix(1_000_000, 0)}
	r.g = NewLedger(b, r.kind.census)
	r.g.Now = func() time.Time { return r.now }
	r.g.ReleasedBefore = func(context.Context) (time.Time, error) { r.reads++; return r.release, nil }
	return r
}

// doom marks copies doomed (their remote objects vanished or terminate).
func (r *gateRun) doom(names ...string) {
	for _, n := range names {
		r.kind.doomed[n] = true
	}
}

// restore brings remote objects back.
func (r *gateRun) restore(names ...string) {
	for _, n := range names {
		delete(r.kind.doomed, n)
	}
}

// gone removes deleted copies.
func (r *gateRun) gone(names ...string) {
	for _, n := range names {
		delete(r.kind.doomed, n)
		r.kind.live--
		r.g.Deleted(key(n))
	}
}

func (r *gateRun) advance(d time.Duration) { r.now = r.now.Add(d) }

// decide judges a copy, letting it SettleVerdict first.
func (r *gateRun) decide(name string) Verdict {
	r.t.Helper()
	v, wait, _, err := r.g.Decide(context.Background(), key(name))
	if err != nil {
		r.t.Fatal(err)
	}
	if v == SettleVerdict {
		r.advance(max(wait, time.Millisecond))
		v, _, _, err = r.g.Decide(context.Background(), key(name))
		if err != nil {
			r.t.Fatal(err)
		}
	}
	return v
}

func (r *gateRun) want(name string, want Verdict) {
	r.t.Helper()
	if got := r.decide(name); got != want {
		r.t.Fatalf("%s: Verdict %v, want %v (held %d)", name, got, want, len(r.g.held))
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

func TestBudgetGate(t *testing.T) {
	def := Budget{MaxFraction: 0.5, MinObjects: 10, Window: 10 * time.Minute}
	cases := map[string]func(t *testing.T){
		"routine deletion allowed after settling": func(t *testing.T) {
			r := newGateRun(t, def, 30)
			r.doom("a")
			v, wait, _, _ := r.g.Decide(context.Background(), key("a"))
			if v != SettleVerdict || wait != Settle {
				t.Fatalf("first look: %v after %v, want SettleVerdict after %v", v, wait, Settle)
			}
			r.want("a", Allow)
			r.want("a", Allow) // a granted deletion stays granted
		},
		"small kind vanishing held": func(t *testing.T) {
			r := newGateRun(t, def, 4)
			r.doom("a", "b", "c", "d")
			for _, n := range []string{"a", "b", "c", "d"} {
				r.want(n, Hold)
			}
			if n := r.g.Held(context.Background()); n != 4 {
				t.Fatalf("held %d, want 4", n)
			}
		},
		"partial restore keeps the Hold": func(t *testing.T) {
			r := newGateRun(t, def, 20)
			all := names("o", 20)
			r.doom(all...)
			r.want(all[0], Hold)
			r.restore(all[:12]...)
			for i := 0; i < 10; i++ { // an hour of retries: 8 doomed of 20 is within budget, still held
				r.advance(6 * time.Minute)
				for _, n := range all[12:] {
					r.want(n, Hold)
				}
			}
			if n := r.g.Held(context.Background()); n != 8 {
				t.Fatalf("held %d, want 8", n)
			}
			r.restore(all[12:]...)
			r.advance(heldStatsAge)
			if n := r.g.Held(context.Background()); n != 0 {
				t.Fatalf("every object back, still %d held", n)
			}
			r.doom(all[0])
			r.want(all[0], Allow) // the Hold ended: a routine deletion goes through
		},
		"mass termination beyond the budget held": func(t *testing.T) {
			r := newGateRun(t, def, 30)
			r.doom(names("o", 11)...) // 11 of 30 terminating, budget 15: allowed
			for _, n := range names("o", 11) {
				r.want(n, Allow)
			}
			r.gone(names("o", 11)...)
			r.doom(names("p", 5)...) // 5 more within the window: 16 > 15 of 30
			r.want("p00", Hold)
			r.want("p04", Hold)
		},
		"window slides": func(t *testing.T) {
			r := newGateRun(t, Budget{MaxFraction: 0.1, MinObjects: 2, Window: time.Minute}, 10)
			r.doom("a")
			r.want("a", Allow)
			r.gone("a")
			r.doom("b")
			r.want("b", Allow)
			r.gone("b")
			r.doom("c")
			r.want("c", Hold) // a third within the minute
			fresh := newGateRun(t, Budget{MaxFraction: 0.1, MinObjects: 2, Window: time.Minute}, 10)
			for _, n := range []string{"a", "b", "c"} {
				fresh.doom(n)
				fresh.want(n, Allow) // the first two left the window before the third
				fresh.gone(n)
				if n == "b" {
					fresh.advance(time.Minute)
				}
			}
		},
		"release from the Region": func(t *testing.T) {
			r := newGateRun(t, def, 4)
			r.doom("a", "b", "c", "d")
			r.want("a", Hold)
			r.advance(time.Minute)
			r.want("b", Hold)
			r.release = r.now.Add(-time.Second) // after every Hold started
			r.advance(ReleaseRecheck)
			r.want("a", Allow)
			r.want("b", Allow)
			r.gone("a", "b")
			r.want("c", Allow)
			r.gone("c")
			r.want("d", Allow) // one copy left: not everything vanishing
		},
		"release before the Hold started releases nothing": func(t *testing.T) {
			r := newGateRun(t, def, 4)
			r.release = r.now.Add(-time.Hour)
			r.doom("a", "b", "c", "d")
			r.want("a", Hold)
			r.advance(ReleaseRecheck)
			r.want("a", Hold)
			if r.reads == 0 {
				t.Fatal("the Region was never read")
			}
		},
		"one summary per interval, Region read bounded": func(t *testing.T) {
			r := newGateRun(t, def, 1000)
			all := names("o", 1000)
			r.doom(all...)
			r.want(all[0], Hold)
			summaries := 0
			for round := 0; round < 10; round++ { // 5 minutes of 30 s requeues
				for _, n := range all {
					_, _, s, err := r.g.Decide(context.Background(), key(n))
					if err != nil {
						t.Fatal(err)
					}
					if s != nil {
						summaries++
						if s.Held != 1000 || s.First.Name != "o00" {
							t.Fatalf("summary %+v", s)
						}
					}
				}
				r.advance(30 * time.Second)
			}
			if summaries > 1 {
				t.Fatalf("%d summaries in 5 minutes", summaries)
			}
			if r.reads > 5*60/int(ReleaseRecheck.Seconds())+1 {
				t.Fatalf("%d Region reads in 5 minutes", r.reads)
			}
			if r.kind.counts > 5*60/int(CensusMaxAge.Seconds())+2 {
				t.Fatalf("%d census walks in 5 minutes", r.kind.counts)
			}
		},
		"a failed count holds": func(t *testing.T) {
			r := newGateRun(t, def, 30)
			r.kind.err = errors.New("boom")
			r.doom("a")
			if v, _, _, _ := r.g.Decide(context.Background(), key("a")); v != SettleVerdict {
				t.Fatalf("first look: %v", v)
			}
			r.advance(Settle)
			if v, _, _, err := r.g.Decide(context.Background(), key("a")); err == nil || v == Allow {
				t.Fatalf("Verdict %v, error %v", v, err)
			}
		},
		"release annotation consumed": func(t *testing.T) {
			r := newGateRun(t, def, 4)
			if !r.g.ReleaseUsable("uid-1") {
				t.Fatal("unused release not usable")
			}
			r.g.UseRelease("uid-1")
			if r.g.ReleaseUsable("uid-1") || !r.g.ReleaseUsable("uid-2") {
				t.Fatal("release not consumed per copy")
			}
		},
	}
	for name, tc := range cases {
		t.Run(name, tc)
	}
}
