package syncer

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestWriteFightThrottle: the same content written again and again (someone keeps undoing it)
// is throttled to one write per fightInterval after fightThreshold undone writes; new content,
// or the same content after a quiet fightWindow, is never throttled.
func TestWriteFightThrottle(t *testing.T) {
	key := fightKey{remote: types.NamespacedName{Namespace: "a", Name: "b"}, side: sideManagement}
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
			{3*time.Second + fightWindow + time.Second, "x", true, false},
			{3*time.Second + fightWindow + 2*time.Second, "x", true, false},
		},
		"new content ends the fight": {
			{0, "x", true, false}, {time.Second, "x", true, false}, {2 * time.Second, "x", true, false},
			{3 * time.Second, "x", true, true}, {4 * time.Second, "y", true, false}, {5 * time.Second, "z", true, false},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			ft := newFightTracker()
			for i, s := range steps {
				v := ft.admit(key, s.hash, t0.Add(s.after))
				if v.allowed != s.allowed || v.report != s.report {
					t.Fatalf("step %d (%s, %q): allowed %v report %v, want %v %v", i, s.after, s.hash, v.allowed, v.report, s.allowed, s.report)
				}
				if !v.allowed && (v.wait <= 0 || v.wait > fightInterval) {
					t.Fatalf("step %d: wait %s", i, v.wait)
				}
				if !v.allowed && ft.retryAfter(key.remote, t0.Add(s.after)) != v.wait {
					t.Fatalf("step %d: retryAfter %s, want %s", i, ft.retryAfter(key.remote, t0.Add(s.after)), v.wait)
				}
			}
		})
	}
}
