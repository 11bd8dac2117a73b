package hub

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ShrinkGuard holds a Distribution's removals of per-region objects when, within its window,
// they would exceed max(1, 10 %) of the Distribution's objects (a region selector typo, a Region
// label dropped, a changed kind), until an operator confirms them with
// D/confirm-removals-before=<RFC 3339 time> on the Distribution (a time after the hold began).
// Removals of objects whose Region no longer exists are always held until confirmed. The agents'
// per-kind deletion budgets cannot see a fleet-wide removal of one object per region; the hub
// can. Its memory is the hub's: a new leader starts with a fresh window and fresh holds (which
// then began at the takeover: an older confirmation does not release them).
type ShrinkGuard struct {
	// Window over which removals are counted.
	Window time.Duration

	mu        sync.Mutex
	removed   map[types.NamespacedName][]time.Time
	heldSince map[types.NamespacedName]time.Time
}

// Removal is what a Distribution's reconcile wants to remove now.
type Removal struct {
	// Wanted is the number of per-region objects to remove.
	Wanted int
	// Total is the number of the Distribution's per-region objects before the removal.
	Total int
	// RegionGone: some removal is of an object whose Region was deleted (always held).
	RegionGone bool
	// ConfirmedBefore is the Distribution's D/confirm-removals-before (zero: none).
	ConfirmedBefore time.Time
}

// Allowance is the budget of removals of a Distribution with total objects.
func Allowance(total int) int { return max(1, total/10) }

// Decide says whether the removals may go ahead now; when not, since when they are held.
func (g *ShrinkGuard) Decide(key types.NamespacedName, now time.Time, r Removal) (allowed bool, heldSince time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed == nil {
		g.removed, g.heldSince = map[types.NamespacedName][]time.Time{}, map[types.NamespacedName]time.Time{}
	}
	recent := g.removed[key][:0]
	for _, t := range g.removed[key] {
		if now.Sub(t) < g.Window {
			recent = append(recent, t)
		}
	}
	g.removed[key] = recent
	if r.Wanted == 0 {
		delete(g.heldSince, key)
		return true, time.Time{}
	}
	since, held := g.heldSince[key]
	if held && r.ConfirmedBefore.After(since) {
		// Confirmed: the held removals go ahead, and count against nothing later.
		delete(g.heldSince, key)
		delete(g.removed, key)
		return true, time.Time{}
	}
	if !held && !r.RegionGone && len(recent)+r.Wanted <= Allowance(r.Total) {
		return true, time.Time{}
	}
	if !held {
		since = now
		g.heldSince[key] = since
	}
	return false, since
}

// Removed records n removals that went ahead.
func (g *ShrinkGuard) Removed(key types.NamespacedName, now time.Time, n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.removed == nil {
		g.removed, g.heldSince = map[types.NamespacedName][]time.Time{}, map[types.NamespacedName]time.Time{}
	}
	for range n {
		g.removed[key] = append(g.removed[key], now)
	}
}

// Forget drops a Distribution's state (it was deleted).
func (g *ShrinkGuard) Forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.removed, key)
	delete(g.heldSince, key)
}
