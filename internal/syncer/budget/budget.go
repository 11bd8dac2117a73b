// Package budget bounds, per kind, the local deletions the remote side causes: a kind's copies
// may lose their remote objects only so fast before the rest are held, until the remote objects
// come back or an operator releases them (docs/design/safety.md#deletion-budget).
package budget

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Budget bounds, per kind, the local deletions the remote side causes
// (docs/design/safety.md#deletion-budget): copies whose remote object vanished without passing through
// the finalizer (orphans: a restored etcd, a wrong kubeconfig, a stripped finalizer) and copies
// of remote objects terminating en masse (a deleted CRD, delete --all).
type Budget struct {
	// MaxFraction of the kind's copies whose deletion may be caused within Window.
	MaxFraction float64
	// MinObjects deletions are always allowed, so that small shards can delete.
	MinObjects int
	// Window is the sliding window over which deletions are counted.
	Window time.Duration
}

// Limit is the largest number of deletions allowed within the window among copies.
func (b Budget) Limit(copies int) int {
	return max(b.MinObjects, int(math.Floor(b.MaxFraction*float64(copies))))
}

// Allows reports whether doomed copies (remote object gone or terminating, not deleted yet),
// out of live copies, may be deleted when granted deletions already happened within the window.
// Everything vanishing (two or more copies, all doomed) is never allowed, whatever MinObjects says.
func (b Budget) Allows(doomed, granted, live int) bool {
	if live >= 2 && doomed >= live {
		return false
	}
	return doomed+granted <= b.Limit(live+granted)
}

// Census is a snapshot of one kind's copies: how many are live (marked, in the shard, not
// terminating locally) and which of them are doomed (their remote object is gone or
// terminating), by remote key, with their local key.
type Census struct {
	Live   int
	Doomed map[types.NamespacedName]types.NamespacedName
}

// CensusTaker takes a kind's census from the caches.
type CensusTaker func(ctx context.Context) (Census, error)

// Verdict is the budget's answer for one deletion.
type Verdict int

const (
	// Allow deletes now.
	Allow Verdict = iota
	// SettleVerdict looks again after a short while: a mass deletion arriving as a burst of watch
	// events is judged whole, not one event at a time.
	SettleVerdict
	// Hold holds the deletion until it is released.
	Hold
)

// Timing of the ledger.
const (
	// Settle is how long a deletion candidate waits before it is judged.
	Settle = 2 * time.Second
	// CensusMaxAge is how long a census is reused: a burst of deletions costs one cache walk.
	CensusMaxAge = time.Second
	// EventInterval is how often a kind's held deletions are summarized in one event.
	EventInterval = 5 * time.Minute
	// ReleaseRecheck is how often, while a hold lasts, the Region is read for a release.
	ReleaseRecheck = 10 * time.Second
)

// Summary describes a kind's hold for its summarizing event.
type Summary struct {
	// Held copies out of Live, and the budget's Limit per Window.
	Held, Live, Limit int
	Window            time.Duration
	// First is the local copy the event regards: the held copy with the smallest local key.
	First types.NamespacedName
}

// Ledger applies the budget to one kind: it counts the deletions the remote side causes and
// holds those past the budget. A hold is latched: once the budget is exceeded,
// every doomed copy is held, and the hold ends only when every held copy's remote object is back
// (or its copy is gone) or an operator releases it; a partial restore never drains it.
type Ledger struct {
	budget Budget
	count  CensusTaker
	// releasedBefore reads the Region's release time (zero: none); nil reads nothing.
	ReleasedBefore func(ctx context.Context) (time.Time, error)
	Now            func() time.Time

	mu sync.Mutex
	c  Census
	at time.Time // when c was taken
	// seen is when each candidate was first judged (for Settle).
	seen map[types.NamespacedName]time.Time
	// grants are the budgeted deletions within the window, by remote key.
	grants map[types.NamespacedName]time.Time
	// latched is when the current hold started (zero: no hold); held the held copies and since
	// when each is held.
	latched time.Time
	held    map[types.NamespacedName]time.Time
	// released are held copies an operator released from management: deleted without budget.
	released map[types.NamespacedName]bool
	// consumed are the UIDs of copies whose release-deletion annotation was used.
	consumed map[types.UID]bool
	// releaseRead is when the Region was last read; lastEvent when the last summary was due.
	releaseRead, lastEvent time.Time
}

// NewLedger returns the ledger of budget b over the census count takes.
func NewLedger(b Budget, count CensusTaker) *Ledger {
	if b.Window <= 0 {
		b.Window = 10 * time.Minute
	}
	return &Ledger{
		budget: b, count: count, Now: time.Now,
		seen: map[types.NamespacedName]time.Time{}, grants: map[types.NamespacedName]time.Time{},
		held: map[types.NamespacedName]time.Time{}, released: map[types.NamespacedName]bool{},
		consumed: map[types.UID]bool{},
	}
}

// Decide judges the deletion of the copy of remote key: allowed, to be judged again after wait
// (SettleVerdict), or held. When a hold's summarizing event is due, summary is set (at most once per
// EventInterval per kind, whatever the number of held copies).
func (g *Ledger) Decide(ctx context.Context, key types.NamespacedName) (v Verdict, wait time.Duration, summary *Summary, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.Now()
	g.expire(now)
	if g.released[key] {
		return Allow, 0, nil, nil
	}
	if _, ok := g.grants[key]; ok {
		return Allow, 0, nil, nil
	}
	first, ok := g.seen[key]
	if !ok {
		first, g.seen[key] = now, now
	}
	if d := first.Add(Settle).Sub(now); d > 0 && g.latched.IsZero() {
		return SettleVerdict, d, nil, nil
	}
	maxAge := CensusMaxAge
	if !g.latched.IsZero() {
		// Held copies come back every heldRequeue: during a hold one walk serves them all for
		// heldStatsAge, not one walk per second.
		maxAge = heldStatsAge
	}
	if g.at.IsZero() || now.Sub(g.at) >= maxAge || g.at.Before(first.Add(Settle)) && g.latched.IsZero() {
		if err := g.recount(ctx, now); err != nil {
			return Hold, 0, nil, err
		}
	}
	if g.latched.IsZero() {
		doomed := g.pending(key)
		if g.budget.Allows(doomed, len(g.grants), g.c.Live) {
			g.grants[key] = now
			delete(g.seen, key)
			return Allow, 0, nil, nil
		}
		g.latched = now
		g.latch(now, key)
	} else {
		g.latch(now, key)
		g.readRelease(ctx, now)
		if g.released[key] {
			return Allow, 0, nil, nil
		}
		if g.latched.IsZero() { // released from management: the rest is judged afresh
			return SettleVerdict, 0, nil, nil
		}
	}
	return Hold, 0, g.summaryDue(now), nil
}

// recount takes a new census and prunes the hold: copies whose remote object is back (or
// whose copy is gone) are no longer held, and a hold with nothing left ends.
func (g *Ledger) recount(ctx context.Context, now time.Time) error {
	c, err := g.count(ctx)
	if err != nil {
		return err
	}
	g.c, g.at = c, now
	for k := range g.held {
		if _, doomed := c.Doomed[k]; !doomed {
			delete(g.held, k)
		}
	}
	for k := range g.released {
		if _, doomed := c.Doomed[k]; !doomed {
			delete(g.released, k)
		}
	}
	if !g.latched.IsZero() && len(g.held) == 0 {
		g.latched, g.lastEvent = time.Time{}, time.Time{}
	}
	return nil
}

// pending counts the doomed copies not granted or released yet, key included.
func (g *Ledger) pending(key types.NamespacedName) int {
	n := 0
	for k := range g.c.Doomed {
		if _, granted := g.grants[k]; !granted && !g.released[k] {
			n++
		}
	}
	if _, ok := g.c.Doomed[key]; !ok {
		n++
	}
	return n
}

// latch holds every doomed copy not granted or released (and key), keeping when each was first held.
func (g *Ledger) latch(now time.Time, key types.NamespacedName) {
	add := func(k types.NamespacedName) {
		if _, granted := g.grants[k]; granted || g.released[k] {
			return
		}
		if _, ok := g.held[k]; !ok {
			g.held[k] = now
		}
	}
	for k := range g.c.Doomed {
		add(k)
	}
	add(key)
}

// readRelease reads the Region's release time (at most every ReleaseRecheck) and releases every
// hold that started before it.
func (g *Ledger) readRelease(ctx context.Context, now time.Time) {
	if g.ReleasedBefore == nil || now.Sub(g.releaseRead) < ReleaseRecheck {
		return
	}
	g.releaseRead = now
	before, err := g.ReleasedBefore(ctx)
	if err != nil || before.IsZero() {
		return
	}
	g.release(before)
}

// release releases every hold that started before t; the hold ends when none is left.
func (g *Ledger) release(t time.Time) {
	for k, since := range g.held {
		if since.Before(t) {
			g.released[k] = true
			delete(g.held, k)
		}
	}
	if len(g.held) == 0 {
		g.latched, g.lastEvent = time.Time{}, time.Time{}
	}
}

// summaryDue returns the hold's summary when its event is due.
func (g *Ledger) summaryDue(now time.Time) *Summary {
	if !g.lastEvent.IsZero() && now.Sub(g.lastEvent) < EventInterval {
		return nil
	}
	g.lastEvent = now
	s := &Summary{Held: len(g.held), Live: g.c.Live, Limit: g.budget.Limit(g.c.Live + len(g.grants)), Window: g.budget.Window}
	locals := make([]types.NamespacedName, 0, len(g.held))
	for k := range g.held {
		if l, ok := g.c.Doomed[k]; ok {
			locals = append(locals, l)
		}
	}
	if len(locals) > 0 {
		s.First = slices.MinFunc(locals, func(a, b types.NamespacedName) int {
			if a.Namespace != b.Namespace {
				return strings.Compare(a.Namespace, b.Namespace)
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	return s
}

// expire forgets grants older than the window and candidates never judged again.
func (g *Ledger) expire(now time.Time) {
	for k, t := range g.grants {
		if now.Sub(t) >= g.budget.Window {
			delete(g.grants, k)
		}
	}
	for k, t := range g.seen {
		if now.Sub(t) >= g.budget.Window {
			delete(g.seen, k)
		}
	}
}

// ReleaseUsable reports whether the release-deletion annotation of the copy uid was not used
// yet: an annotation releases one deletion, not the copy forever.
func (g *Ledger) ReleaseUsable(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.consumed[uid]
}

// UseRelease records that the release-deletion annotation of the copy uid let its deletion through.
func (g *Ledger) UseRelease(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.consumed[uid] = true
}

// Deleted records that the deletion of the copy of key was issued: a release from management
// is used up.
func (g *Ledger) Deleted(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.released, key)
	delete(g.seen, key)
}

// heldStatsAge is how old a census may be when held deletions are reported; a hold whose copies
// stopped asking (their remote objects came back) is seen to end within it.
const heldStatsAge = 5 * time.Second

// Held reports the number of held deletions, recounting from the caches while a hold lasts.
func (g *Ledger) Held(ctx context.Context) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.latched.IsZero() {
		return 0
	}
	if now := g.Now(); now.Sub(g.at) >= heldStatsAge {
		_ = g.recount(ctx, now) // a failed count keeps the last one
	}
	return len(g.held)
}

// Reset forgets every judgement made on what the agent saw before (after a management identity
// episode): holds, grants and SettleVerdict times. Consumed releases stay consumed.
func (g *Ledger) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.c, g.at = Census{}, time.Time{}
	g.latched, g.releaseRead, g.lastEvent = time.Time{}, time.Time{}, time.Time{}
	clear(g.seen)
	clear(g.grants)
	clear(g.held)
	clear(g.released)
}
