package syncer

import (
	"context"
	"math"
	"sync"
	"time"
)

// DeletionBudget bounds deletions of local copies whose remote object vanished from management
// without passing through the finalizer (docs/design.md#deletion-budget): a restored etcd, a wrong kubeconfig, a
// stripped finalizer. Deleting through the finalizer (the remote object is terminating) is an
// explicit intent and never budgeted.
type DeletionBudget struct {
	// MaxFraction of the kind's managed local objects that may be orphaned at once.
	MaxFraction float64
	// MinObjects orphans are always allowed, so that small shards can delete.
	MinObjects int
}

// Allows reports whether orphans local copies, out of managed, may be deleted.
func (b DeletionBudget) Allows(orphans, managed int) bool {
	return orphans <= b.Limit(managed)
}

// Limit is the largest number of orphans allowed among managed objects.
func (b DeletionBudget) Limit(managed int) int {
	return max(b.MinObjects, int(math.Floor(b.MaxFraction*float64(managed))))
}

// orphanCounter counts a kind's managed local objects and, among them, the orphans.
type orphanCounter func(ctx context.Context) (orphans, managed int, err error)

// budgetGate evaluates the budget for one kind. Counting walks the local cache, so a verdict is
// reused for a short while: a burst of orphan reconciles costs one walk, not one per object.
type budgetGate struct {
	budget DeletionBudget
	count  orphanCounter
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	at      time.Time
	allowed bool
	orphans int
	managed int
}

func newBudgetGate(b DeletionBudget, count orphanCounter) *budgetGate {
	return &budgetGate{budget: b, count: count, maxAge: time.Second, now: time.Now}
}

// Check returns whether orphan deletions are allowed now, with the counts behind the verdict.
func (g *budgetGate) Check(ctx context.Context) (allowed bool, orphans, managed int, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.at.IsZero() && g.now().Sub(g.at) < g.maxAge {
		return g.allowed, g.orphans, g.managed, nil
	}
	orphans, managed, err = g.count(ctx)
	if err != nil {
		return false, 0, 0, err
	}
	g.at, g.orphans, g.managed = g.now(), orphans, managed
	g.allowed = g.budget.Allows(orphans, managed)
	return g.allowed, orphans, managed, nil
}

// heldFreshness is how long a "held" verdict is reported without being confirmed: held orphans
// are looked at again every heldRequeue, so a hold that is no longer confirmed has lifted (the
// objects came back, or were released).
const heldFreshness = 2 * heldRequeue

// Held reports the last verdict while it is fresh: whether deletions are being held, and how many.
func (g *budgetGate) Held() (held bool, orphans int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at.IsZero() || g.allowed || g.now().Sub(g.at) > heldFreshness {
		return false, 0
	}
	return true, g.orphans
}
