package syncer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Write-loop detection: another writer that keeps undoing the agent's writes on one object (a
// management controller rewriting the status, a regional controller rewriting spec under
// Replace) must not make the agent write back as fast as the API servers answer.
const (
	// fightWindow: writing the same content again within this long of the previous write of it
	// means the previous write was undone.
	fightWindow = time.Minute
	// fightThreshold undone writes in a row make a fight.
	fightThreshold = 3
	// fightInterval is the least time between two writes to an object in a fight.
	fightInterval = 10 * time.Second
	// fightReportEvery is how often a continuing fight is reported again.
	fightReportEvery = time.Minute
)

// fightKey names one kind of write to one object: the status upload, or the spec of the copy.
type fightKey struct {
	remote types.NamespacedName
	side   string
}

type fightState struct {
	hash        string    // what was last written
	at          time.Time // when
	undone      int       // how many writes of the same content in a row
	nextAllowed time.Time // in a fight: the earliest next write
	// held: the last attempt was held back until nextAllowed, and that write is still owed (the
	// pass that was held must run again then, see retryAfter).
	held       bool
	reportedAt time.Time
	// prev is the state before the last admitted write, restored when that write failed: a
	// write that never happened undoes nothing, and is not undone by anyone.
	prev *fightState
}

// fightTracker remembers, per object and side, the last write and how often it was undone.
// An entry whose last write is older than fightWindow decides nothing any more (the next write
// starts afresh), so entries are swept once per fightWindow: the tracker holds only the objects
// written in the last minute or two, not every object ever written.
type fightTracker struct {
	mu        sync.Mutex
	m         map[fightKey]*fightState
	lastSweep time.Time
}

func newFightTracker() *fightTracker { return &fightTracker{m: map[fightKey]*fightState{}} }

// fightVerdict is what admit decided about one write.
type fightVerdict struct {
	// allowed: write now. When not, wait is how long until the next write may go.
	allowed bool
	wait    time.Duration
	// fighting: the object is in a fight (undone writes); report: say so now (an event).
	fighting, report bool
	undone           int
}

// admit decides whether content hash may be written to key now, and records the write when it
// may. Writing other content, or the same content after fightWindow, is never throttled: only
// the same content written again and again (undone by someone else) is.
func (t *fightTracker) admit(key fightKey, hash string, now time.Time) fightVerdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	s := t.m[key]
	if s == nil {
		s = &fightState{}
		t.m[key] = s
	}
	before := *s
	before.prev = nil
	if s.hash == hash && now.Sub(s.at) < fightWindow {
		s.undone++
	} else {
		s.undone, s.nextAllowed = 0, time.Time{}
	}
	v := fightVerdict{allowed: true, undone: s.undone}
	if s.undone >= fightThreshold {
		v.fighting = true
		if now.Before(s.nextAllowed) {
			s.undone-- // this attempt wrote nothing: it undoes nothing
			s.held = true
			return fightVerdict{wait: s.nextAllowed.Sub(now), fighting: true, undone: s.undone}
		}
		s.nextAllowed = now.Add(fightInterval)
		if now.Sub(s.reportedAt) >= fightReportEvery {
			v.report, s.reportedAt = true, now
		}
	}
	s.hash, s.at, s.prev, s.held = hash, now, &before, false
	return v
}

// sweep drops, at most once per fightWindow, the entries whose last write is older than
// fightWindow: admit would start them afresh (undone 0), they hold back no write (a fight's next
// write is due fightInterval after its last one), and a fight that resumes is reported at once
// either way (its last report is older than fightReportEvery).
func (t *fightTracker) sweep(now time.Time) {
	if now.Sub(t.lastSweep) < fightWindow {
		return
	}
	t.lastSweep = now
	for k, s := range t.m {
		if now.Sub(s.at) >= fightWindow {
			delete(t.m, k)
		}
	}
}

// failed takes back the last admitted write of key: it did not happen (an error, a conflict), so
// a retry of the same content is not an undone write.
func (t *fightTracker) failed(key fightKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.m[key]; s != nil && s.prev != nil {
		prev := *s.prev
		prev.nextAllowed, prev.reportedAt = s.nextAllowed, s.reportedAt // the pacing stays
		t.m[key] = &prev
	}
}

// retryAfter is how long until a held write of any side of remote may go (0: none waits). A
// held write is owed whatever the count of undone writes says meanwhile: a paced write that
// failed (a conflict with the other writer) gives its undone count back, and the attempt held
// after it must still run again once the pace allows, or the object stays as the other writer
// left it until some unrelated event.
func (t *fightTracker) retryAfter(remote types.NamespacedName, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, side := range []string{sideManagement, sideLocal} {
		if s := t.m[fightKey{remote, side}]; s != nil && s.held && s.nextAllowed.After(now) {
			wait = max(wait, s.nextAllowed.Sub(now))
		}
	}
	return wait
}

// forget drops what is known about remote (it left the shard or was deleted).
func (t *fightTracker) forget(remote types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, fightKey{remote, sideManagement})
	delete(t.m, fightKey{remote, sideLocal})
}
