package syncer

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// bulkWindow is how long routine Normal events of one reason and kind are gathered before they
// are reported: one Event for all of them.
const bulkWindow = 2 * time.Second

// bulkNames is how many of the gathered objects a bulk Event names.
const bulkNames = 5

// bulkEvents reports routine Normal events (a copy created, a local namespace created) in bulk.
// An initial sync of 10,000 objects wrote 10,000 such Events, one per copy: the API servers'
// work doubled for news no person reads one by one. Within bulkWindow after the first of them,
// the objects are gathered; then one Event is written, regarding the first object: the single
// object's own note when it was alone (a person creating one object sees the usual Event on
// it), else a count with the first objects' names. What is counted per object is in the
// metrics (regionsync_syncs_total), not in Events.
type bulkEvents struct {
	rec            events.EventRecorder
	reason, action string
	// what names the objects in a bulk note ("Tenant copies created from management").
	what string

	mu        sync.Mutex
	first     runtime.Object
	firstNote string
	names     []string
	count     int
}

// newBulkEvents reports reason events to rec in bulk; what describes the gathered objects.
func newBulkEvents(rec events.EventRecorder, reason, action, what string) *bulkEvents {
	return &bulkEvents{rec: rec, reason: reason, action: action, what: what}
}

// add gathers one event regarding regarding, named name, whose note alone would be note. The
// first add of a window schedules the report.
func (b *bulkEvents) add(regarding runtime.Object, name, note string) {
	if b == nil || b.rec == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.count == 0 {
		b.first, b.firstNote = regarding, note
		time.AfterFunc(bulkWindow, b.flush)
	}
	b.count++
	if len(b.names) < bulkNames {
		b.names = append(b.names, name)
	}
}

// flush writes the gathered events as one and starts a new window.
func (b *bulkEvents) flush() {
	b.mu.Lock()
	first, note, names, count := b.first, b.firstNote, b.names, b.count
	b.first, b.firstNote, b.names, b.count = nil, "", nil, 0
	b.mu.Unlock()
	if count == 0 {
		return
	}
	if count == 1 {
		b.rec.Eventf(first, nil, corev1.EventTypeNormal, b.reason, b.action, "%s", note)
		return
	}
	list := strings.Join(names, ", ")
	if count > len(names) {
		list += fmt.Sprintf(" and %d more", count-len(names))
	}
	b.rec.Eventf(first, nil, corev1.EventTypeNormal, b.reason, b.action, "%d %s within %s: %s", count, b.what, bulkWindow, list)
}
