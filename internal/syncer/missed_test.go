package syncer

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

// TestMissedEvents: live events seen without a queue come back most recent first, only within
// missedWindow, once; past maxMissed the stale and then the oldest go.
func TestMissedEvents(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		adds []struct {
			name string
			at   time.Duration
		}
		takeAt time.Duration
		want   []string
	}{
		{name: "none", takeAt: 0, want: nil},
		{name: "most recent first", adds: []struct {
			name string
			at   time.Duration
		}{{"a", 0}, {"b", time.Second}, {"c", 2 * time.Second}}, takeAt: 3 * time.Second, want: []string{"c", "b", "a"}},
		{name: "a repeat counts at its latest", adds: []struct {
			name string
			at   time.Duration
		}{{"a", 0}, {"b", time.Second}, {"a", 2 * time.Second}}, takeAt: 3 * time.Second, want: []string{"a", "b"}},
		{name: "older than the window left to the full pass", adds: []struct {
			name string
			at   time.Duration
		}{{"old", 0}, {"new", missedWindow}}, takeAt: missedWindow + time.Second, want: []string{"new"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m missedEvents
			for _, a := range c.adds {
				m.add(req(a.name), t0.Add(a.at))
			}
			got := m.take(t0.Add(c.takeAt))
			if len(got) != len(c.want) {
				t.Fatalf("took %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i].req.Name != c.want[i] {
					t.Fatalf("took %v, want %v", got, c.want)
				}
			}
			if again := m.take(t0.Add(c.takeAt)); len(again) != 0 {
				t.Fatalf("taken twice: %v", again)
			}
		})
	}

	t.Run("bounded", func(t *testing.T) {
		var m missedEvents
		m.add(req("stale"), t0)
		for i := range maxMissed - 1 {
			m.add(req(fmt.Sprint(i)), t0.Add(missedWindow/2+time.Duration(i)*time.Millisecond))
		}
		// Full: the stale entry goes first.
		m.add(req("x"), t0.Add(missedWindow+time.Second))
		if _, ok := m.at[req("stale")]; ok || len(m.at) != maxMissed {
			t.Fatalf("stale entry kept or size %d", len(m.at))
		}
		// Full of fresh entries: the oldest goes.
		m.add(req("y"), t0.Add(missedWindow+2*time.Second))
		if _, ok := m.at[req("0")]; ok || len(m.at) != maxMissed {
			t.Fatalf("oldest entry kept or size %d", len(m.at))
		}
		if got := m.take(t0.Add(missedWindow + 3*time.Second)); len(got) != maxMissed || got[0].req.Name != "y" {
			t.Fatalf("took %d, first %v", len(got), got[0])
		}
	})
}
