package syncer

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// Object states, as counted on the Region status and in regionsync_objects.
const (
	StateSynced  = "synced"
	StatePending = "pending"
	StateFailed  = "failed"
	StatePaused  = "paused"
	StateInvalid = "invalid"
)

// States lists every object state.
var States = []string{StateSynced, StatePending, StateFailed, StatePaused, StateInvalid}

// stateTracker remembers the state of every shard object of one kind after its last reconcile.
type stateTracker struct {
	resource string
	mu       sync.Mutex
	states   map[types.NamespacedName]string
	counts   map[string]int
	lastSync time.Time
}

func newStateTracker(resource string) *stateTracker {
	t := &stateTracker{resource: resource, states: map[types.NamespacedName]string{}, counts: map[string]int{}}
	for _, s := range States {
		telemetry.Objects.WithLabelValues(resource, s).Set(0)
	}
	return t
}

// set records an object's state; "" forgets the object (gone from the shard).
func (t *stateTracker) set(key types.NamespacedName, state string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, had := t.states[key]
	if had && old == state {
		return
	}
	if had {
		t.counts[old]--
		telemetry.Objects.WithLabelValues(t.resource, old).Set(float64(t.counts[old]))
	}
	if state == "" {
		delete(t.states, key)
		return
	}
	t.states[key] = state
	t.counts[state]++
	telemetry.Objects.WithLabelValues(t.resource, state).Set(float64(t.counts[state]))
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
	Counts        map[string]int
	DeletionsHeld int
	LastSync      time.Time
}

func (t *stateTracker) stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := make(map[string]int, len(States))
	for _, s := range States {
		c[s] = t.counts[s]
	}
	return Stats{Resource: t.resource, Counts: c, LastSync: t.lastSync}
}
