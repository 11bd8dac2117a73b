package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ShrinkGuard holds removals of per-region objects that would exceed, within its window,
// max(1, 10 %) of a Distribution's per-region objects (a region selector typo, a Region label
// dropped, a source selector that suddenly matches nothing, a changed kind), or of one region's
// per-region objects across all Distributions (a Region label many Distributions select on
// dropped, many Distributions deleted at once), until an operator confirms them with D/confirm-removals-before=<RFC 3339 time> on
// the Distribution (a time after the hold began). Removals of objects whose Region no longer
// exists are always held until confirmed. The agents' per-kind deletion budgets cannot see a
// fleet-wide removal of one object per region; the hub can.
//
// Its memory (each window's start and removal count, each hold's start) is written to its Store
// before any removal it allows, so a new leader goes on with the same windows and holds.
type ShrinkGuard struct {
	// Window over which removals are counted (fixed windows: a window starts with its first
	// removal and ends Window later).
	Window time.Duration
	// Store keeps the guard's memory across hub restarts and leader changes (nil: in memory only).
	Store GuardStore

	mu      sync.Mutex
	loaded  bool
	records map[string]GuardRecord
}

// GuardRecord is the guard's memory of one Distribution or one region.
type GuardRecord struct {
	// WindowStart is when the current window began (its first removal).
	WindowStart time.Time `json:"windowStart,omitzero"`
	// Removed counts the removals allowed within the window.
	Removed int `json:"removed,omitempty"`
	// HeldSince is when the Distribution's held removals were first held (Distributions only).
	HeldSince time.Time `json:"heldSince,omitzero"`
}

// GuardStore keeps the guard's records, by key.
type GuardStore interface {
	// Load reads every record.
	Load(ctx context.Context) (map[string]GuardRecord, error)
	// Save replaces the records (written before the removals they allow).
	Save(ctx context.Context, records map[string]GuardRecord) error
}

// Removal is what a Distribution's reconcile wants to remove now.
type Removal struct {
	// Wanted is the number of per-region objects to remove.
	Wanted int
	// Total is the number of the Distribution's per-region objects before the removal.
	Total int
	// RegionGone names a deleted Region some removal is in ("": none); always held.
	RegionGone string
	// Regions are, per region, the removals wanted there and how many per-region objects the
	// region holds across all Distributions.
	Regions map[string]RegionRemoval
	// ConfirmedBefore is the Distribution's D/confirm-removals-before (zero: none).
	ConfirmedBefore time.Time
	// Deleting: the Distribution itself is being deleted (deletionPolicy Delete). Deleting it is
	// an explicit intent, so its own budget does not apply, nor does RegionGone; each region's
	// budget across all Distributions does (many Distributions deleted at once: a deleted tenant
	// namespace, a prune of the wrong folder).
	Deleting bool
}

// RegionRemoval is a Distribution's wanted removals in one region, and the region's size.
type RegionRemoval struct {
	// Wanted removals in the region.
	Wanted int
	// Total per-region objects of the region, across all Distributions.
	Total int
}

// Decision is the guard's answer.
type Decision struct {
	// Allowed: the removals may go ahead (and were counted).
	Allowed bool
	// HeldSince is when the hold began (when not allowed).
	HeldSince time.Time
	// Why says what holds them (when not allowed).
	Why string
}

// Allowance is the budget of removals of a Distribution, or a region, with total objects.
func Allowance(total int) int { return max(1, total/10) }

func distributionRecord(key types.NamespacedName) string {
	return "distribution." + key.Namespace + "." + key.Name
}

func regionRecord(region string) string { return "region." + region }

// Decide says whether a Distribution's removals may go ahead now. Allowed removals are counted
// in the Distribution's and each region's window, and the memory saved, before it returns; an
// error (the memory could not be read or saved) allows nothing.
func (g *ShrinkGuard) Decide(ctx context.Context, key types.NamespacedName, now time.Time, r Removal) (Decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		if r.Wanted == 0 {
			return Decision{Allowed: true}, nil // nothing to remove: placing goes on
		}
		return Decision{}, err
	}
	before := maps.Clone(g.records)
	dk := distributionRecord(key)
	g.expire(now)
	rec := g.records[dk]
	held := !rec.HeldSince.IsZero()
	confirmed, why := g.judge(rec, r)
	switch {
	case r.Wanted == 0:
		if held {
			rec.HeldSince = time.Time{}
			g.set(dk, rec)
		}
		return Decision{Allowed: true}, g.save(ctx, before)
	case confirmed:
		// Confirmed: the held removals go ahead, and count against nothing later.
		g.set(dk, GuardRecord{})
		return Decision{Allowed: true}, g.save(ctx, before)
	case why == "":
		g.count(dk, now, r.Wanted)
		for region, rr := range r.Regions {
			g.count(regionRecord(region), now, rr.Wanted)
		}
		return Decision{Allowed: true}, g.save(ctx, before)
	}
	if !held {
		rec.HeldSince = now
		g.set(dk, rec)
	}
	return Decision{HeldSince: rec.HeldSince, Why: why}, g.save(ctx, before)
}

// judge is the guard's rule over a Distribution's record rec (its windows expired): whether r's
// removals are confirmed (they were held, and D/confirm-removals-before is after the hold
// began), else why they are held ("" when they may go ahead).
func (g *ShrinkGuard) judge(rec GuardRecord, r Removal) (confirmed bool, why string) {
	held := !rec.HeldSince.IsZero()
	if held && r.ConfirmedBefore.After(rec.HeldSince) {
		return true, ""
	}
	why = g.exceeds(rec, r)
	if held && why == "" {
		why = "held until confirmed"
	}
	return false, why
}

// Judge says what Decide would answer now, without counting, holding or saving anything (a
// preview): HeldSince is zero for a hold that would begin now.
func (g *ShrinkGuard) Judge(ctx context.Context, key types.NamespacedName, now time.Time, r Removal) (Decision, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		return Decision{}, err
	}
	saved := maps.Clone(g.records)
	defer func() { g.records = saved }()
	g.expire(now)
	rec := g.records[distributionRecord(key)]
	confirmed, why := g.judge(rec, r)
	if r.Wanted == 0 || confirmed || why == "" {
		return Decision{Allowed: true}, nil
	}
	return Decision{HeldSince: rec.HeldSince, Why: why}, nil
}

// exceeds says which budget the removals exceed ("" when none).
func (g *ShrinkGuard) exceeds(rec GuardRecord, r Removal) string {
	if r.RegionGone != "" && !r.Deleting {
		return fmt.Sprintf("Region %s was deleted (a deleted Region's objects are removed only when confirmed)", r.RegionGone)
	}
	if !r.Deleting && rec.Removed+r.Wanted > Allowance(r.Total) {
		return fmt.Sprintf("removing %d of the Distribution's %d per-region objects (%d already removed within the window) exceeds max(1, 10%%)", r.Wanted, r.Total, rec.Removed)
	}
	for _, region := range slices.Sorted(maps.Keys(r.Regions)) {
		rr := r.Regions[region]
		done := g.records[regionRecord(region)].Removed
		if rr.Wanted > 0 && done+rr.Wanted > Allowance(rr.Total) {
			return fmt.Sprintf("removing %d of Region %s's %d per-region objects across all Distributions (%d already removed within the window) exceeds max(1, 10%%)", rr.Wanted, region, rr.Total, done)
		}
	}
	return ""
}

// count adds n removals to a record's window (starting one when none runs).
func (g *ShrinkGuard) count(k string, now time.Time, n int) {
	if n == 0 {
		return
	}
	rec := g.records[k]
	if rec.WindowStart.IsZero() {
		rec.WindowStart = now
	}
	rec.Removed += n
	g.set(k, rec)
}

// expire ends the windows that are over.
func (g *ShrinkGuard) expire(now time.Time) {
	for k, rec := range g.records {
		if !rec.WindowStart.IsZero() && now.Sub(rec.WindowStart) >= g.Window {
			rec.WindowStart, rec.Removed = time.Time{}, 0
			g.set(k, rec)
		}
	}
}

// set stores a record, dropping empty ones.
func (g *ShrinkGuard) set(k string, rec GuardRecord) {
	if rec == (GuardRecord{}) {
		delete(g.records, k)
		return
	}
	g.records[k] = rec
}

func (g *ShrinkGuard) load(ctx context.Context) error {
	if g.loaded {
		return nil
	}
	g.records = map[string]GuardRecord{}
	if g.Store != nil {
		recs, err := g.Store.Load(ctx)
		if err != nil {
			return fmt.Errorf("reading the shrink guard's memory: %w", err)
		}
		maps.Copy(g.records, recs)
	}
	g.loaded = true
	return nil
}

// save writes the records when they changed; on failure the memory is read again next time.
func (g *ShrinkGuard) save(ctx context.Context, before map[string]GuardRecord) error {
	if g.Store == nil || maps.Equal(before, g.records) {
		return nil
	}
	if err := g.Store.Save(ctx, maps.Clone(g.records)); err != nil {
		g.loaded = false
		return fmt.Errorf("saving the shrink guard's memory: %w", err)
	}
	return nil
}

// Forget drops a Distribution's record (it was deleted); the regions' windows stay.
func (g *ShrinkGuard) Forget(ctx context.Context, key types.NamespacedName) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.load(ctx); err != nil {
		return err
	}
	before := maps.Clone(g.records)
	delete(g.records, distributionRecord(key))
	return g.save(ctx, before)
}

// encodeRecords and decodeRecords are the store's format: one JSON record per key.
func encodeRecords(records map[string]GuardRecord) (map[string]string, error) {
	out := make(map[string]string, len(records))
	for k, rec := range records {
		b, err := json.Marshal(rec)
		if err != nil {
			return nil, err
		}
		out[k] = string(b)
	}
	return out, nil
}

// A record that does not decode is an error: the guard then removes nothing until the ConfigMap
// is fixed or deleted (it fails closed).
func decodeRecords(data map[string]string) (map[string]GuardRecord, error) {
	out := make(map[string]GuardRecord, len(data))
	for k, v := range data {
		if !strings.HasPrefix(k, "distribution.") && !strings.HasPrefix(k, "region.") {
			continue
		}
		var rec GuardRecord
		if err := json.Unmarshal([]byte(v), &rec); err != nil {
			return nil, fmt.Errorf("record %s: %w", k, err)
		}
		if rec.Removed < 0 {
			return nil, fmt.Errorf("record %s: removed %d is negative", k, rec.Removed)
		}
		out[k] = rec
	}
	return out, nil
}
