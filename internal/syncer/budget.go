package syncer

import (
	"context"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// DeletionBudget bounds, per kind, the local deletions the remote side causes
// (docs/design.md#deletion-budget): copies whose remote object vanished without passing through
// the finalizer (orphans: a restored etcd, a wrong kubeconfig, a stripped finalizer) and copies
// of remote objects terminating en masse (a deleted CRD, delete --all).
type DeletionBudget struct {
	// MaxFraction of the kind's copies whose deletion may be caused within Window.
	MaxFraction float64
	// MinObjects deletions are always allowed, so that small shards can delete.
	MinObjects int
	// Window is the sliding window over which deletions are counted.
	Window time.Duration
}

// Limit is the largest number of deletions allowed within the window among copies.
func (b DeletionBudget) Limit(copies int) int {
	return max(b.MinObjects, int(math.Floor(b.MaxFraction*float64(copies))))
}

// Allows reports whether doomed copies (remote object gone or terminating, not deleted yet),
// out of live copies, may be deleted when granted deletions already happened within the window.
// Everything vanishing (two or more copies, all doomed) is never allowed, whatever MinObjects says.
func (b DeletionBudget) Allows(doomed, granted, live int) bool {
	if live >= 2 && doomed >= live {
		return false
	}
	return doomed+granted <= b.Limit(live+granted)
}

// census is a snapshot of one kind's copies: how many are live (marked, in the shard, not
// terminating locally) and which of them are doomed (their remote object is gone or
// terminating), by remote key, with their local key.
type census struct {
	live   int
	doomed map[types.NamespacedName]types.NamespacedName
}

// censusTaker takes a kind's census from the caches.
type censusTaker func(ctx context.Context) (census, error)

// verdict is the budget's answer for one deletion.
type verdict int

const (
	// allow: delete now.
	allow verdict = iota
	// settle: look again after a short while; a mass deletion arriving as a burst of watch
	// events is judged whole, not one event at a time.
	settle
	// hold: the deletion is held until released.
	hold
)

// Timing of the gate.
const (
	// deletionSettle is how long a deletion candidate waits before it is judged.
	deletionSettle = 2 * time.Second
	// censusMaxAge is how long a census is reused: a burst of deletions costs one cache walk.
	censusMaxAge = time.Second
	// heldEventInterval is how often a kind's held deletions are summarized in one event.
	heldEventInterval = 5 * time.Minute
	// releaseRecheck is how often, while a hold lasts, the Region is read for a release.
	releaseRecheck = 10 * time.Second
)

// heldSummary describes a kind's hold for its summarizing event.
type heldSummary struct {
	held, live, limit int
	// first is the local copy the event regards: the held copy with the smallest local key.
	first types.NamespacedName
}

// budgetGate applies the budget to one kind. A hold is latched: once the budget is exceeded,
// every doomed copy is held, and the hold ends only when every held copy's remote object is back
// (or its copy is gone) or an operator releases it; a partial restore never drains it.
type budgetGate struct {
	budget DeletionBudget
	count  censusTaker
	// releasedBefore reads the Region's release time (zero: none); nil reads nothing.
	releasedBefore func(ctx context.Context) (time.Time, error)
	now            func() time.Time

	mu sync.Mutex
	c  census
	at time.Time // when c was taken
	// seen is when each candidate was first judged (for deletionSettle).
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

func newBudgetGate(b DeletionBudget, count censusTaker) *budgetGate {
	if b.Window <= 0 {
		b.Window = 10 * time.Minute
	}
	return &budgetGate{
		budget: b, count: count, now: time.Now,
		seen: map[types.NamespacedName]time.Time{}, grants: map[types.NamespacedName]time.Time{},
		held: map[types.NamespacedName]time.Time{}, released: map[types.NamespacedName]bool{},
		consumed: map[types.UID]bool{},
	}
}

// Decide judges the deletion of the copy of remote key: allowed, to be judged again after wait
// (settle), or held. When a hold's summarizing event is due, summary is set (at most once per
// heldEventInterval per kind, whatever the number of held copies).
func (g *budgetGate) Decide(ctx context.Context, key types.NamespacedName) (v verdict, wait time.Duration, summary *heldSummary, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	g.expire(now)
	if g.released[key] {
		return allow, 0, nil, nil
	}
	if _, ok := g.grants[key]; ok {
		return allow, 0, nil, nil
	}
	first, ok := g.seen[key]
	if !ok {
		first, g.seen[key] = now, now
	}
	if d := first.Add(deletionSettle).Sub(now); d > 0 && g.latched.IsZero() {
		return settle, d, nil, nil
	}
	maxAge := censusMaxAge
	if !g.latched.IsZero() {
		// Held copies come back every heldRequeue: during a hold one walk serves them all for
		// heldStatsAge, not one walk per second.
		maxAge = heldStatsAge
	}
	if g.at.IsZero() || now.Sub(g.at) >= maxAge || g.at.Before(first.Add(deletionSettle)) && g.latched.IsZero() {
		if err := g.recount(ctx, now); err != nil {
			return hold, 0, nil, err
		}
	}
	if g.latched.IsZero() {
		doomed := g.pending(key)
		if g.budget.Allows(doomed, len(g.grants), g.c.live) {
			g.grants[key] = now
			delete(g.seen, key)
			return allow, 0, nil, nil
		}
		g.latched = now
		g.latch(now, key)
	} else {
		g.latch(now, key)
		g.readRelease(ctx, now)
		if g.released[key] {
			return allow, 0, nil, nil
		}
		if g.latched.IsZero() { // released from management: the rest is judged afresh
			return settle, 0, nil, nil
		}
	}
	return hold, 0, g.summaryDue(now), nil
}

// recount takes a new census and prunes the hold: copies whose remote object is back (or
// whose copy is gone) are no longer held, and a hold with nothing left ends.
func (g *budgetGate) recount(ctx context.Context, now time.Time) error {
	c, err := g.count(ctx)
	if err != nil {
		return err
	}
	g.c, g.at = c, now
	for k := range g.held {
		if _, doomed := c.doomed[k]; !doomed {
			delete(g.held, k)
		}
	}
	for k := range g.released {
		if _, doomed := c.doomed[k]; !doomed {
			delete(g.released, k)
		}
	}
	if !g.latched.IsZero() && len(g.held) == 0 {
		g.latched, g.lastEvent = time.Time{}, time.Time{}
	}
	return nil
}

// pending counts the doomed copies not granted or released yet, key included.
func (g *budgetGate) pending(key types.NamespacedName) int {
	n := 0
	for k := range g.c.doomed {
		if _, granted := g.grants[k]; !granted && !g.released[k] {
			n++
		}
	}
	if _, ok := g.c.doomed[key]; !ok {
		n++
	}
	return n
}

// latch holds every doomed copy not granted or released (and key), keeping when each was first held.
func (g *budgetGate) latch(now time.Time, key types.NamespacedName) {
	add := func(k types.NamespacedName) {
		if _, granted := g.grants[k]; granted || g.released[k] {
			return
		}
		if _, ok := g.held[k]; !ok {
			g.held[k] = now
		}
	}
	for k := range g.c.doomed {
		add(k)
	}
	add(key)
}

// readRelease reads the Region's release time (at most every releaseRecheck) and releases every
// hold that started before it.
func (g *budgetGate) readRelease(ctx context.Context, now time.Time) {
	if g.releasedBefore == nil || now.Sub(g.releaseRead) < releaseRecheck {
		return
	}
	g.releaseRead = now
	before, err := g.releasedBefore(ctx)
	if err != nil || before.IsZero() {
		return
	}
	g.release(before)
}

// release releases every hold that started before t; the hold ends when none is left.
func (g *budgetGate) release(t time.Time) {
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
func (g *budgetGate) summaryDue(now time.Time) *heldSummary {
	if !g.lastEvent.IsZero() && now.Sub(g.lastEvent) < heldEventInterval {
		return nil
	}
	g.lastEvent = now
	s := &heldSummary{held: len(g.held), live: g.c.live, limit: g.budget.Limit(g.c.live + len(g.grants))}
	locals := make([]types.NamespacedName, 0, len(g.held))
	for k := range g.held {
		if l, ok := g.c.doomed[k]; ok {
			locals = append(locals, l)
		}
	}
	if len(locals) > 0 {
		s.first = slices.MinFunc(locals, func(a, b types.NamespacedName) int {
			if a.Namespace != b.Namespace {
				return strings.Compare(a.Namespace, b.Namespace)
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	return s
}

// expire forgets grants older than the window and candidates never judged again.
func (g *budgetGate) expire(now time.Time) {
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
func (g *budgetGate) ReleaseUsable(uid types.UID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.consumed[uid]
}

// UseRelease records that the release-deletion annotation of the copy uid let its deletion through.
func (g *budgetGate) UseRelease(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.consumed[uid] = true
}

// Deleted records that the deletion of the copy of key was issued: a release from management
// is used up.
func (g *budgetGate) Deleted(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.released, key)
	delete(g.seen, key)
}

// heldStatsAge is how old a census may be when held deletions are reported; a hold whose copies
// stopped asking (their remote objects came back) is seen to end within it.
const heldStatsAge = 5 * time.Second

// Held reports the number of held deletions, recounting from the caches while a hold lasts.
func (g *budgetGate) Held(ctx context.Context) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.latched.IsZero() {
		return 0
	}
	if now := g.now(); now.Sub(g.at) >= heldStatsAge {
		_ = g.recount(ctx, now) // a failed count keeps the last one
	}
	return len(g.held)
}

// reset forgets every judgement made on what the agent saw before (after a management identity
// episode): holds, grants and settle times. Consumed releases stay consumed.
func (g *budgetGate) reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.c, g.at = census{}, time.Time{}
	g.latched, g.releaseRead, g.lastEvent = time.Time{}, time.Time{}, time.Time{}
	clear(g.seen)
	clear(g.grants)
	clear(g.held)
	clear(g.released)
}
