package backlog

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/regionsync/regionsync/test/framework/testenv"
)

func feedReq(i int) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("o%05d", i)}}
}

// The backlog keeps arrival order, holds a request once, forgets dropped ones and releases its
// memory once nothing is pending.
func TestLowFeedBacklog(t *testing.T) {
	f := New("test-backlog")
	for _, i := range []int{1, 2, 3, 2, 4, 1, 5} {
		f.Add(feedReq(i))
	}
	f.Drop(feedReq(3))
	f.Drop(feedReq(9)) // never added: nothing happens
	if got := f.Len(); got != 4 {
		t.Fatalf("len = %d, want 4", got)
	}
	var got []reconcile.Request
	got = append(got, f.take(2)...)
	f.Add(feedReq(3)) // re-added after the drop: its old place still ahead, it takes it, once
	got = append(got, f.take(10)...)
	want := []reconcile.Request{feedReq(1), feedReq(2), feedReq(3), feedReq(4), feedReq(5)}
	if !slices.Equal(got, want) {
		t.Fatalf("taken %v, want %v", got, want)
	}
	if f.order != nil || f.pending != nil {
		t.Fatalf("an empty backlog keeps its memory: order cap %d, pending %d", cap(f.order), len(f.pending))
	}
	f.Add(feedReq(7))
	f.Drop(feedReq(7))
	if f.order != nil || f.pending != nil {
		t.Fatal("a backlog emptied by drops keeps its memory")
	}
	if got := f.take(5); len(got) != 0 {
		t.Fatalf("take from an empty backlog = %v", got)
	}
}

// run hands a large backlog to a real priority queue without ever holding more than the window
// ready in it, each request once, in order; a live request added meanwhile is handed out first
// and not again from the backlog.
func TestLowFeedRun(t *testing.T) {
	const n = 1000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := priorityqueue.New[reconcile.Request]("test-backlog", func(o *priorityqueue.Opts[reconcile.Request]) { o.Log = logr.Discard() })
	defer q.ShutDown()
	rq := &Queue{Q: q, Low: New("test-run")}
	for i := range n {
		rq.Low.Add(feedReq(i))
	}
	done := make(chan struct{})
	go func() { rq.Low.Run(ctx, q); close(done) }()

	deadline := time.Now().Add(30 * time.Second)
	testenv.Eventually(t, "the queue holds the window", 30*time.Second, func() error {
		if l := q.Len(); l < Window {
			return fmt.Errorf("%d ready items", l)
		}
		return nil
	})
	if l := q.Len(); l != Window {
		t.Fatalf("queue holds %d ready items, want the window (%d)", l, Window)
	}
	live := feedReq(n - 1)
	rq.Add(live)
	item, _, _ := q.GetWithPriority()
	if item != live {
		t.Fatalf("first item %v, want the live one %v", item, live)
	}
	q.Done(item)

	var got []reconcile.Request
	for len(got) < n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests handed out", len(got), n-1)
		}
		if l := q.Len(); l > Window+1 {
			t.Fatalf("queue holds %d ready items, more than the window", l)
		}
		item, _ := q.Get()
		got = append(got, item)
		q.Done(item)
	}
	for i, req := range got {
		if req != feedReq(i) {
			t.Fatalf("item %d is %v, want %v (order, each once)", i, req, feedReq(i))
		}
	}
	testenv.Consistently(t, "the live request does not come again from the backlog", 200*time.Millisecond, func() error {
		if l := q.Len(); l != 0 {
			return fmt.Errorf("%d items left", l)
		}
		return nil
	})
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not end with its context")
	}
	if rq.Low.order != nil || rq.Low.pending != nil {
		t.Fatal("the ended feed keeps its backlog")
	}
	// A handler that still holds the ended run's queue adds nothing that would never be handed
	// over (nor show in regionsync_pass_backlog).
	rq.Low.Add(feedReq(1))
	if n := rq.Low.Len(); n != 0 {
		t.Fatalf("the ended feed took a request: %d pending", n)
	}
}
