package hub

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// memStore is a GuardStore in memory, as a ConfigMap would keep it between two hub processes.
type memStore struct {
	data  map[string]string
	fails bool
}

func (m *memStore) Load(context.Context) (map[string]GuardRecord, error) {
	return decodeRecords(m.data)
}
func (m *memStore) Save(_ context.Context, recs map[string]GuardRecord) error {
	if m.fails {
		return errors.New("refused")
	}
	data, err := encodeRecords(recs)
	m.data = data
	return err
}

type guardStep struct {
	at      time.Duration
	key     string // the Distribution (default "d")
	r       Removal
	allowed bool
	why     string // a substring of the reason it is held
}

func TestShrinkGuard(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	regionB := func(wanted, total int) map[string]RegionRemoval {
		return map[string]RegionRemoval{"r-b": {Wanted: wanted, Total: total}}
	}
	for name, steps := range map[string][]guardStep{
		"one of three allowed (max(1, 10%))": {{0, "", Removal{Wanted: 1, Total: 3}, true, ""}},
		"two of three held, confirmed after the hold began": {
			{0, "", Removal{Wanted: 2, Total: 3}, false, "removing 2 of the Distribution's 3"},
			{time.Second, "", Removal{Wanted: 2, Total: 3, ConfirmedBefore: t0.Add(-time.Second)}, false, ""}, // confirmed before the hold: not for it
			{2 * time.Second, "", Removal{Wanted: 2, Total: 3, ConfirmedBefore: t0.Add(time.Second)}, true, ""},
		},
		"removals add up within the window, not after": {
			{0, "", Removal{Wanted: 1, Total: 30}, true, ""},                // 1 of max(1, 3)
			{time.Second, "", Removal{Wanted: 1, Total: 29}, true, ""},      // 2 of max(1, 2)
			{2 * time.Second, "", Removal{Wanted: 1, Total: 28}, false, ""}, // 3 of max(1, 2)
			{3 * time.Second, "", Removal{Wanted: 0, Total: 28}, true, ""},  // the change was undone: no hold left
			{11 * time.Minute, "", Removal{Wanted: 1, Total: 28}, true, ""}, // the window has passed
		},
		"a deleted Region is always held": {{0, "", Removal{Wanted: 1, Total: 100, RegionGone: "r-x"}, false, "Region r-x was deleted"}},
		"one region's removals across Distributions": {
			// Ten Distributions of two objects each lose region r-b (10 objects there): each may
			// remove its one, the region only max(1, 10%) = 1 within the window.
			{0, "d1", Removal{Wanted: 1, Total: 2, Regions: regionB(1, 10)}, true, ""},
			{time.Second, "d2", Removal{Wanted: 1, Total: 2, Regions: regionB(1, 9)}, false, "Region r-b's 9 per-region objects across all Distributions (1 already removed"},
			{2 * time.Second, "d3", Removal{Wanted: 1, Total: 2, Regions: regionB(1, 9)}, false, "Region r-b"},
			{3 * time.Second, "d2", Removal{Wanted: 1, Total: 2, Regions: regionB(1, 9), ConfirmedBefore: t0.Add(2 * time.Second)}, true, ""},
			// The confirmation counts against nothing: d3 stays held until confirmed itself.
			{4 * time.Second, "d3", Removal{Wanted: 1, Total: 2, Regions: regionB(1, 8)}, false, "Region r-b's 8 per-region objects"},
		},
		"a deleted Distribution: its own budget does not apply, each region's does": {
			// Deleting one Distribution removes all its objects (3 of 3, one per region): allowed
			// while each region stays within max(1, 10%).
			{0, "d1", Removal{Wanted: 3, Total: 3, Deleting: true, Regions: map[string]RegionRemoval{"r-a": {1, 5}, "r-b": {1, 5}, "r-c": {1, 5}}}, true, ""},
			// Three more deleted at once: past each region's budget, held until confirmed.
			{time.Second, "d2", Removal{Wanted: 3, Total: 3, Deleting: true, Regions: map[string]RegionRemoval{"r-a": {1, 4}, "r-b": {1, 4}, "r-c": {1, 4}}}, false, "Region r-a's 4 per-region objects"},
			{2 * time.Second, "d3", Removal{Wanted: 3, Total: 3, Deleting: true, Regions: map[string]RegionRemoval{"r-a": {1, 4}, "r-b": {1, 4}, "r-c": {1, 4}}}, false, "Region r-a"},
			{3 * time.Second, "d2", Removal{Wanted: 3, Total: 3, Deleting: true, Regions: map[string]RegionRemoval{"r-a": {1, 4}, "r-b": {1, 4}, "r-c": {1, 4}}, ConfirmedBefore: t0.Add(2 * time.Second)}, true, ""},
			// A deleted Region does not hold a deleted Distribution's removals.
			{4 * time.Second, "d4", Removal{Wanted: 1, Total: 1, Deleting: true, RegionGone: "r-x", Regions: map[string]RegionRemoval{"r-x": {1, 10}}}, true, ""},
		},
	} {
		t.Run(name, func(t *testing.T) {
			store := &memStore{}
			for i, s := range steps {
				// A new guard (a new hub process) for every step: only what the store kept is known.
				g := &ShrinkGuard{Window: 10 * time.Minute, Store: store}
				key := types.NamespacedName{Namespace: "n", Name: s.key}
				if s.key == "" {
					key.Name = "d"
				}
				dec, err := g.Decide(context.Background(), key, t0.Add(s.at), s.r)
				if err != nil {
					t.Fatal(err)
				}
				if dec.Allowed != s.allowed || !strings.Contains(dec.Why, s.why) {
					t.Fatalf("step %d (%+v): %+v, want allowed %v and a reason with %q", i, s.r, dec, s.allowed, s.why)
				}
			}
		})
	}
}

func TestShrinkGuardStore(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key := types.NamespacedName{Namespace: "n", Name: "d"}
	store := &memStore{}
	g := &ShrinkGuard{Window: time.Minute, Store: store}
	if dec, err := g.Decide(context.Background(), key, t0, Removal{Wanted: 1, Total: 5, Regions: map[string]RegionRemoval{"r-a": {1, 5}}}); err != nil || !dec.Allowed {
		t.Fatalf("%+v %v", dec, err)
	}
	want := map[string]GuardRecord{"distribution.n.d": {WindowStart: t0, Removed: 1}, "region.r-a": {WindowStart: t0, Removed: 1}}
	if got, _ := store.Load(context.Background()); !maps.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	// Nothing to remove and no hold: nothing written.
	before := maps.Clone(store.data)
	if _, err := g.Decide(context.Background(), key, t0.Add(time.Second), Removal{Total: 4}); err != nil || !maps.Equal(before, store.data) {
		t.Fatalf("a decision at rest wrote %v (%v)", store.data, err)
	}
	// A store that cannot be read allows nothing to be removed, and does not stop the rest.
	broken := &ShrinkGuard{Window: time.Minute, Store: &memStore{data: map[string]string{"region.x": "{"}}}
	if dec, err := broken.Decide(context.Background(), key, t0, Removal{Wanted: 1, Total: 50}); err == nil || dec.Allowed {
		t.Fatalf("a removal with unreadable memory: %+v, %v", dec, err)
	}
	if dec, err := broken.Decide(context.Background(), key, t0, Removal{Total: 50}); err != nil || !dec.Allowed {
		t.Fatalf("nothing to remove with unreadable memory: %+v, %v", dec, err)
	}
	// A store that refuses the write allows nothing.
	store.fails = true
	g = &ShrinkGuard{Window: time.Minute, Store: store}
	if dec, err := g.Decide(context.Background(), types.NamespacedName{Namespace: "n", Name: "e"}, t0.Add(2*time.Minute), Removal{Wanted: 1, Total: 50}); err == nil {
		t.Fatalf("allowed %+v although the memory could not be saved", dec)
	}
	// Forget drops the Distribution's record; the region's window stays.
	store.fails = false
	if err := g.Forget(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Load(context.Background()); !maps.Equal(got, map[string]GuardRecord{"region.r-a": {WindowStart: t0, Removed: 1}}) {
		t.Fatalf("after Forget: %v", got)
	}
	for _, bad := range []string{"{", `{"removed":-1}`} {
		if _, err := decodeRecords(map[string]string{"region.x": bad}); err == nil {
			t.Errorf("the record %s decoded", bad)
		}
	}
}

// FuzzDecodeRecords: whatever the ConfigMap holds, decoding never panics, and what decodes
// encodes and decodes to the same records.
func FuzzDecodeRecords(f *testing.F) {
	f.Add("region.r-a", `{"windowStart":"2026-01-01T00:00:00Z","removed":3}`)
	f.Add("distribution.ns.d", `{"heldSince":"2026-01-01T00:00:00.5Z"}`)
	f.Add("other", `x`)
	f.Add("region.r-b", `{"removed":-1,"windowStart":"nope"}`)
	f.Fuzz(func(t *testing.T, key, value string) {
		recs, err := decodeRecords(map[string]string{key: value})
		if err != nil {
			return
		}
		data, err := encodeRecords(recs)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeRecords(data)
		if err != nil {
			t.Fatalf("re-decoding %v: %v", data, err)
		}
		if len(again) != len(recs) {
			t.Fatalf("%v then %v", recs, again)
		}
		for k, r := range recs {
			a := again[k]
			if !a.WindowStart.Equal(r.WindowStart) || !a.HeldSince.Equal(r.HeldSince) || a.Removed != r.Removed {
				t.Fatalf("%s: %+v then %+v", k, r, a)
			}
		}
	})
}
