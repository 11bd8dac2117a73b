package fight

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestWriteFightThrottle: the same content written again and again (someone keeps undoing it)
// is throttled to one write per Interval after Threshold undone writes; new content,
// or the same content after a quiet Window, is never throttled.
func TestWriteFightThrottle(t *testing.T) {
	key := Key{Remote: types.NamespacedName{Namespace: "a", Name: "b"}, Side: SideManagement}
	t0 := time.Unix(1000, 0)
	type step struct {
		after   time.Duration // since t0
		hash    string
		allowed bool
		report  bool
	}
	cases := map[string][]step{
		"changing content is never throttled": {
			{0, "1", true, false}, {time.Second, "2", true, false}, {2 * time.Second, "3", true, false},
			{3 * time.Second, "4", true, false}, {4 * time.Second, "5", true, false},
		},
		"undone writes are throttled after the threshold": {
			{0, "x", true, false},
			{100 * time.Millisecond, "x", true, false},
			{200 * time.Millisecond, "x", true, false},
			{300 * time.Millisecond, "x", true, true}, // third undo: a fight, written once, reported
			{400 * time.Millisecond, "x", false, false},
			{5 * time.Second, "x", false, false},
			{10400 * time.Millisecond, "x", true, false}, // 10 s later: one more write
			{10500 * time.Millisecond, "x", false, false},
		},
		"a quiet window ends the fight": {
			{0, "x", true, false}, {time.Second, "x", true, false}, {2 * time.Second, "x", true, false},
			{3 * time.Second, "x", true, true}, {4 * time.Second, "x", false, false},
			{3*time.Second + Window + time.Second, "x", true, false},
			{3*time.Second + Window + 2*time.Second, "x", true, false},
		},
		"new content ends the fight": {
			{0, "x", true, false}, {time.Second, "x", true, false}, {2 * time.Second, "x", true, false},
			{3 * time.Second, "x", true, true}, {4 * time.Second, "y", true, false}, {5 * time.Second, "z", true, false},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			ft := NewTracker()
			for i, s := range steps {
				v := ft.Admit(key, s.hash, t0.Add(s.after))
				if v.Allowed != s.allowed || v.Report != s.report {
					t.Fatalf("step %d (%s, %q): allowed %v report %v, want %v %v", i, s.after, s.hash, v.Allowed, v.Report, s.allowed, s.report)
				}
				if !v.Allowed && (v.Wait <= 0 || v.Wait > Interval) {
					t.Fatalf("step %d: wait %s", i, v.Wait)
				}
				if !v.Allowed && ft.RetryAfter(key.Remote, t0.Add(s.after)) != v.Wait {
					t.Fatalf("step %d: retryAfter %s, want %s", i, ft.RetryAfter(key.Remote, t0.Add(s.after)), v.Wait)
				}
			}
		})
	}
}

// TestWriteFightFailedWritesAreNotUndone: writes that failed (conflicts, server errors) and are
// retried with the same content never make a fight.
func TestWriteFightFailedWritesAreNotUndone(t *testing.T) {
	key := Key{Remote: types.NamespacedName{Namespace: "a", Name: "b"}, Side: SideLocal}
	ft := NewTracker()
	t0 := time.Unix(1000, 0)
	if v := ft.Admit(key, "x", t0); !v.Allowed {
		t.Fatal("first write throttled")
	}
	for i := 1; i <= 10; i++ {
		ft.Failed(key) // the previous attempt failed
		if v := ft.Admit(key, "x", t0.Add(time.Duration(i)*250*time.Millisecond)); !v.Allowed || v.Fighting {
			t.Fatalf("retry %d of a failed write: allowed %v fighting %v (undone %d)", i, v.Allowed, v.Fighting, v.Undone)
		}
	}
	// Succeeded writes that are undone still make a fight.
	for i := 11; i <= 14; i++ {
		ft.Admit(key, "x", t0.Add(time.Duration(i)*250*time.Millisecond))
	}
	if v := ft.Admit(key, "x", t0.Add(4*time.Second)); v.Allowed || !v.Fighting {
		t.Fatalf("undone writes after the failures: allowed %v fighting %v", v.Allowed, v.Fighting)
	}
}

// TestWriteFightHeldAfterFailedWrite: the sequence a suite run caught (the copy stayed as the
// other writer left it after the fight): a paced write in a fight fails with a conflict, which
// gives its undone count back below the threshold; the next attempt is still held until the pace
// allows, and its retry must be scheduled (retryAfter), or nothing ever writes the object again.
func TestWriteFightHeldAfterFailedWrite(t *testing.T) {
	key := Key{Remote: types.NamespacedName{Namespace: "a", Name: "b"}, Side: SideLocal}
	ft := NewTracker()
	t0 := time.Unix(1000, 0)
	for i := range Threshold + 1 { // three undone writes, then the first paced one
		if v := ft.Admit(key, "x", t0.Add(time.Duration(i)*200*time.Millisecond)); !v.Allowed {
			t.Fatalf("write %d held", i)
		}
	}
	if got := ft.RetryAfter(key.Remote, t0.Add(time.Second)); got != 0 {
		t.Fatalf("retryAfter %s with no write held, want 0", got)
	}
	ft.Failed(key) // the paced write met a conflict
	at := t0.Add(2 * time.Second)
	v := ft.Admit(key, "x", at)
	if v.Allowed {
		t.Fatal("a write within the pace after a failed paced write was allowed")
	}
	if got := ft.RetryAfter(key.Remote, at); got != v.Wait || got <= 0 {
		t.Fatalf("retryAfter %s after a held write, want %s", got, v.Wait)
	}
	// Once the held write went, nothing is owed.
	at = at.Add(v.Wait)
	if v := ft.Admit(key, "x", at); !v.Allowed {
		t.Fatal("the held write was not allowed when due")
	}
	if got := ft.RetryAfter(key.Remote, at.Add(time.Second)); got != 0 {
		t.Fatalf("retryAfter %s after the held write went, want 0", got)
	}
}

// TestWriteFightSweep: the tracker forgets objects not written for Window (it would
// otherwise hold every object ever written), keeps the recent ones and a running fight, and
// what it forgot decides nothing differently.
func TestWriteFightSweep(t *testing.T) {
	ft := NewTracker()
	t0 := time.Unix(1000, 0)
	key := func(name string) Key {
		return Key{Remote: types.NamespacedName{Namespace: "a", Name: name}, Side: SideManagement}
	}
	for i := range 100 {
		ft.Admit(key(fmt.Sprint("old-", i)), "x", t0)
	}
	// A fight on "fight": three undone writes, then one every Interval.
	for i := range 4 {
		ft.Admit(key("fight"), "f", t0.Add(time.Duration(i)*time.Second))
	}
	ft.Admit(key("recent"), "x", t0.Add(Window-time.Second))
	for at := t0.Add(Interval + 3*time.Second); at.Before(t0.Add(Window + 5*time.Second)); at = at.Add(Interval) {
		if v := ft.Admit(key("fight"), "f", at); !v.Allowed || !v.Fighting {
			t.Fatalf("fight at %s: %+v, want allowed in a fight", at.Sub(t0), v)
		}
	}
	now := t0.Add(Window + 6*time.Second)
	if v := ft.Admit(key("new"), "x", now); !v.Allowed {
		t.Fatalf("new object: %+v", v)
	}
	if len(ft.m) != 3 {
		t.Fatalf("%d entries after the sweep, want 3 (fight, recent, new): %v", len(ft.m), ft.m)
	}
	if v := ft.Admit(key("fight"), "f", now.Add(time.Second)); v.Allowed || !v.Fighting {
		t.Fatalf("the fight was forgotten: %+v", v)
	}
	// A forgotten object starts afresh, as it would have without the sweep (its last write is
	// older than Window).
	if v := ft.Admit(key("old-1"), "x", now); !v.Allowed || v.Undone != 0 {
		t.Fatalf("forgotten object: %+v", v)
	}
}
