// Package backlog holds a controller run's low-priority requests (an informer's initial list, a
// resync, a claim period's full pass) outside its workqueue and hands them over a window at a
// time, in the order they came, each once.
package backlog

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/internal/telemetry"
)

// Feed is the backlog of one controller run's low-priority requests (an informer's initial
// list, a resync, a claim period's full pass): it hands them to the run's workqueue a window at a
// time, in the order they came, each once.
//
// The priority queue alone would order them behind live events just as well, but it keeps every
// queued item in Go maps (its items, and each item's add time for the workqueue_* metrics) that
// never shrink once grown: after the full pass over a 10,000-object shard they held ~2.5 MB for
// the rest of the process's life, a tenth of the syncing replica's live heap (make bench's heap
// figure). The feed's backlog is a slice and a set it drops as soon as the pass is handed over,
// so the workqueue holds at most Window low items besides the live events.
type Feed struct {
	mu sync.Mutex
	// order is the backlog in arrival order; an entry no longer in pending was dropped (a live
	// event queued it) or handed over already.
	order []reconcile.Request
	// pending is the set of requests in the backlog.
	pending map[reconcile.Request]struct{}
	// wake is signalled when the backlog may have become non-empty.
	wake chan struct{}
	// gauge is regionsync_pass_backlog for the kind.
	gauge prometheus.Gauge
	// closed is set when run ends: an event handler may still hold the run's queue for a moment,
	// and what it adds then would sit in the backlog (and the gauge) with no run to hand it over.
	closed bool
}

// Window is how many low-priority items the feed keeps ready in a workqueue: enough for any
// configured concurrency to find work between two polls, small enough that the queue's maps stay
// small.
const Window = 64

// Poll is how often a feed with a backlog looks for room in its workqueue.
const Poll = 5 * time.Millisecond

// New returns an empty feed whose backlog is the gauge regionsync_pass_backlog of resource.
func New(resource string) *Feed {
	return &Feed{wake: make(chan struct{}, 1), gauge: telemetry.PassBacklog.WithLabelValues(resource)}
}

// Add puts req at the end of the backlog, unless it is pending already (it keeps its place); a
// request dropped and added again before the backlog passed its old place may take that place.
func (f *Feed) Add(req reconcile.Request) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return // the run ended: the next claim period's full pass covers req
	}
	if f.pending == nil {
		f.pending = map[reconcile.Request]struct{}{}
	}
	if _, ok := f.pending[req]; !ok {
		f.pending[req] = struct{}{}
		f.order = append(f.order, req)
	}
	f.gauge.Set(float64(len(f.pending)))
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Drop removes req from the backlog: a live event queued it at normal priority, which does what
// the pending low-priority pass would have done.
func (f *Feed) Drop(req reconcile.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.pending[req]; !ok {
		return
	}
	delete(f.pending, req)
	f.gauge.Set(float64(len(f.pending)))
	f.compactLocked()
}

// take removes and returns up to n requests from the front of the backlog.
func (f *Feed) take(n int) []reconcile.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []reconcile.Request
	for len(out) < n && len(f.order) > 0 {
		req := f.order[0]
		f.order[0] = reconcile.Request{} // the array outlives the slice's front: let the strings go
		f.order = f.order[1:]
		if _, ok := f.pending[req]; ok {
			delete(f.pending, req)
			out = append(out, req)
		}
	}
	f.gauge.Set(float64(len(f.pending)))
	f.compactLocked()
	return out
}

// compactLocked releases the backlog's memory once nothing is pending: a map that held a whole
// shard keeps its size until it is dropped.
func (f *Feed) compactLocked() {
	if len(f.pending) == 0 {
		f.order, f.pending = nil, nil
	}
}

// Len is the number of pending requests.
func (f *Feed) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// Run hands the backlog to q, keeping at most Window items ready in it, until ctx ends or q
// shuts down; the backlog is then forgotten (the next claim period's full pass covers it).
func (f *Feed) Run(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	defer func() {
		f.mu.Lock()
		f.order, f.pending, f.closed = nil, nil, true
		f.gauge.Set(0)
		f.mu.Unlock()
	}()
	poll := time.NewTimer(Poll)
	defer poll.Stop()
	for {
		if q.ShuttingDown() {
			return
		}
		if room := Window - q.Len(); room > 0 {
			for _, req := range f.take(room) {
				AddLow(q, req)
			}
		}
		if f.Len() == 0 {
			select {
			case <-ctx.Done():
				return
			case <-f.wake:
			}
			continue
		}
		poll.Reset(Poll)
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
	}
}

// Queue is one controller run's workqueue and the feed of its low-priority requests.
type Queue struct {
	Q   workqueue.TypedRateLimitingInterface[reconcile.Request]
	Low *Feed
}

// Add queues req at normal priority (a live event), ahead of the low-priority backlog, and
// takes it out of that backlog.
func (rq *Queue) Add(req reconcile.Request) {
	rq.Q.Add(req)
	rq.Low.Drop(req)
}

// AddLow adds req below every live event (the initial list, a resync, the full pass of a new
// claim period, as the Feed hands them over): controller-runtime's priority queue hands out
// higher priorities first, and an item queued low is raised when a live event adds it again.
func AddLow(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
		return
	}
	q.Add(req)
}
