package syncer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// ObjectState is a shard object's state after its last reconcile, as counted on the Region
// status and in regionsync_objects.
type ObjectState string

// Object states.
const (
	StateSynced  ObjectState = "synced"
	StatePending ObjectState = "pending"
	StateFailed  ObjectState = "failed"
	StatePaused  ObjectState = "paused"
	StateInvalid ObjectState = "invalid"

	// stateGone is an object no longer among the shard's live objects: forgotten, not counted.
	stateGone ObjectState = ""
)

// States lists every object state.
var States = []ObjectState{StateSynced, StatePending, StateFailed, StatePaused, StateInvalid}

// stateTracker remembers the state of every shard object of one kind after its last reconcile.
type stateTracker struct {
	resource string
	mu       sync.Mutex
	states   map[types.NamespacedName]ObjectState
	counts   map[ObjectState]int
	lastSync time.Time
}

func newStateTracker(resource string) *stateTracker {
	t := &stateTracker{resource: resource, states: map[types.NamespacedName]ObjectState{}, counts: map[ObjectState]int{}}
	for _, s := range States {
		telemetry.Objects.WithLabelValues(resource, string(s)).Set(0)
	}
	return t
}

// set records an object's state; stateGone forgets the object.
func (t *stateTracker) set(key types.NamespacedName, state ObjectState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.states[key]
	if had && old == state {
		return
	}
	if had {
		t.counts[old]--
		telemetry.Objects.WithLabelValues(t.resource, string(old)).Set(float64(t.counts[old]))
	}
	if state == stateGone {
		delete(t.states, key)
		return
	}
	t.states[key] = state
	t.counts[state]++
	telemetry.Objects.WithLabelValues(t.resource, string(state)).Set(float64(t.counts[state]))
}

// wrote records that a sync wrote a change.
func (t *stateTracker) wrote(now time.Time) {
	t.mu.Lock()
	t.lastSync = now
	t.mu.Unlock()
}

// Stats are one kind's counts.
type Stats struct {
	Resource      string
	Counts        map[ObjectState]int
	DeletionsHeld int
	LastSync      time.Time
	// FanOutMatching, FanOutCurrent and FanOutFailed sum the kind's fan-out objects' counts:
	// namespaces matching, copies current, namespaces whose copy failed.
	FanOutMatching, FanOutCurrent, FanOutFailed int
}

func (t *stateTracker) stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := make(map[ObjectState]int, len(States))
	for _, s := range States {
		c[s] = t.counts[s]
	}
	return Stats{Resource: t.resource, Counts: c, LastSync: t.lastSync}
}

// knows reports whether the object has a state (it was reconciled since it entered the shard).
func (t *stateTracker) knows(key types.NamespacedName) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.states[key]
	return ok
}
