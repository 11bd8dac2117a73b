// Package fight detects write loops: another writer that keeps undoing the agent's writes on one
// object (a management controller rewriting the status, a regional controller rewriting spec
// under Replace) must not make the agent write back as fast as the API servers answer.
package fight

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The pacing of writes in a fight.
const (
	// Window: writing the same content again within this long of the previous write of it
	// means the previous write was undone.
	Window = time.Minute
	// Threshold undone writes in a row make a fight.
	Threshold = 3
	// Interval is the least time between two writes to an object in a fight.
	Interval = 10 * time.Second
	// ReportEvery is how often a continuing fight is reported again.
	ReportEvery = time.Minute
)

// The sides a write goes to.
const (
	// SideManagement: the status the agent uploads to management.
	SideManagement = "management"
	// SideLocal: the spec of the local copy.
	SideLocal = "local"
)

// Key names one kind of write to one object: the status upload, or the spec of the copy.
type Key struct {
	// Remote is the management object.
	Remote types.NamespacedName
	// Side is SideManagement or SideLocal.
	Side string
}

type state struct {
	hash        string    // what was last written
	at          time.Time // when
	undone      int       // how many writes of the same content in a row
	nextAllowed time.Time // in a fight: the earliest next write
	// held: the last attempt was held back until nextAllowed, and that write is still owed (the
	// pass that was held must run again then, see RetryAfter).
	held       bool
	reportedAt time.Time
	// prev is the state before the last admitted write, restored when that write failed: a
	// write that never happened undoes nothing, and is not undone by anyone.
	prev *state
}

// Tracker remembers, per object and side, the last write and how often it was undone.
// An entry whose last write is older than Window decides nothing any more (the next write
// starts afresh), so entries are swept once per Window: the tracker holds only the objects
// written in the last minute or two, not every object ever written.
type Tracker struct {
	mu        sync.Mutex
	m         map[Key]*state
	lastSweep time.Time
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{m: map[Key]*state{}} }

// Verdict is what Admit decided about one write.
type Verdict struct {
	// Allowed: write now. When not, Wait is how long until the next write may go.
	Allowed bool
	Wait    time.Duration
	// Fighting: the object is in a fight (undone writes); Report: say so now (an event).
	Fighting, Report bool
	// Undone is how many writes of the same content in a row were undone.
	Undone int
}

// Admit decides whether content hash may be written to key now, and records the write when it
// may. Writing other content, or the same content after Window, is never throttled: only
// the same content written again and again (undone by someone else) is.
func (t *Tracker) Admit(key Key, hash string, now time.Time) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweep(now)
	s := t.m[key]
	if s == nil {
		s = &state{}
		t.m[key] = s
	}
	before := *s
	before.prev = nil
	if s.hash == hash && now.Sub(s.at) < Window {
		s.undone++
	} else {
		s.undone, s.nextAllowed = 0, time.Time{}
	}
	v := Verdict{Allowed: true, Undone: s.undone}
	if s.undone >= Threshold {
		v.Fighting = true
		if now.Before(s.nextAllowed) {
			s.undone-- // this attempt wrote nothing: it undoes nothing
			s.held = true
			return Verdict{Wait: s.nextAllowed.Sub(now), Fighting: true, Undone: s.undone}
		}
		s.nextAllowed = now.Add(Interval)
		if now.Sub(s.reportedAt) >= ReportEvery {
			v.Report, s.reportedAt = true, now
		}
	}
	s.hash, s.at, s.prev, s.held = hash, now, &before, false
	return v
}

// sweep drops, at most once per Window, the entries whose last write is older than
// Window: admit would start them afresh (undone 0), they hold back no write (a fight's next
// write is due Interval after its last one), and a fight that resumes is reported at once
// either way (its last report is older than ReportEvery).
func (t *Tracker) sweep(now time.Time) {
	if now.Sub(t.lastSweep) < Window {
		return
	}
	t.lastSweep = now
	for k, s := range t.m {
		if now.Sub(s.at) >= Window {
			delete(t.m, k)
		}
	}
}

// Failed takes back the last admitted write of key: it did not happen (an error, a conflict), so
// a retry of the same content is not an undone write.
func (t *Tracker) Failed(key Key) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.m[key]; s != nil && s.prev != nil {
		prev := *s.prev
		prev.nextAllowed, prev.reportedAt = s.nextAllowed, s.reportedAt // the pacing stays
		t.m[key] = &prev
	}
}

// RetryAfter is how long until a held write of any side of remote may go (0: none waits). A
// held write is owed whatever the count of undone writes says meanwhile: a paced write that
// failed (a conflict with the other writer) gives its undone count back, and the attempt held
// after it must still run again once the pace allows, or the object stays as the other writer
// left it until some unrelated event.
func (t *Tracker) RetryAfter(remote types.NamespacedName, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var wait time.Duration
	for _, side := range []string{SideManagement, SideLocal} {
		if s := t.m[Key{remote, side}]; s != nil && s.held && s.nextAllowed.After(now) {
			wait = max(wait, s.nextAllowed.Sub(now))
		}
	}
	return wait
}

// Forget drops what is known about remote (it left the shard or was deleted).
func (t *Tracker) Forget(remote types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, Key{remote, SideManagement})
	delete(t.m, Key{remote, SideLocal})
}
