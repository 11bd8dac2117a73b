//go:build integration

package syncer_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	demov1alpha1 "github.com/regionsync/regionsync/api/demo/v1alpha1"
	"github.com/regionsync/regionsync/pkg/regionsync"
)

// TestLiveChangeBeforeInitialSync: with 2,000 objects mid-initial-sync, a live change to one
// object is reconciled before the queue drains. The initial list (and a claim period's full
// pass, and resyncs) is queued at low priority; a live event is not.
//
// Not parallel: it runs before the parallel tests start, so that its 2,000 objects neither slow
// them down nor are slowed down by them (the agent stops when it ends, most objects never synced).
func TestLiveChangeBeforeInitialSync(t *testing.T) {
	const n = 2000
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Resources[0].Concurrency = 2 // a slow drain: the live change must not wait for it
		o.Resources[0].Secrets = nil
	}))
	e.stop()
	ns := e.remoteNamespace("priority")
	names := make(chan int)
	var wg sync.WaitGroup
	var createErr error
	var mu sync.Mutex
	for range 8 {
		wg.Go(func() {
			for i := range names {
				tn := &demov1alpha1.Tenant{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("w%04d%s", i, e.suffix)},
					Spec:       demov1alpha1.TenantSpec{DisplayName: "initial", Plan: "team", Replicas: 1},
				}
				if err := e.mgmt.Create(e.ctx, tn); err != nil {
					mu.Lock()
					createErr = err
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		names <- i
	}
	close(names)
	wg.Wait()
	if createErr != nil {
		t.Fatal(createErr)
	}

	copies := func() int {
		l := &demov1alpha1.TenantList{}
		if err := e.local.List(e.ctx, l, client.InNamespace(ns), client.MatchingLabels{e.keys.Region: e.opts.Region}); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	e.start()
	e.eventually("the initial sync under way", func() error {
		if c := copies(); c < 20 {
			return fmt.Errorf("%d copies", c)
		}
		return nil
	})
	// The last object in the initial list order: without priorities it would be synced last.
	live := "w1999"
	before := copies()
	e.setRemote(ns, live, func(o *demov1alpha1.Tenant) { o.Spec.DisplayName = "live" })
	changed := time.Now()
	e.eventually("the live change arrived", func() error {
		l, err := e.getLocal(ns, live)
		if err != nil {
			return err
		}
		if l.Spec.DisplayName != "live" {
			return fmt.Errorf("display name %q", l.Spec.DisplayName)
		}
		return nil
	})
	took, synced := time.Since(changed), copies()
	t.Logf("live change synced after %s; copies written meanwhile: %d (%d → %d of %d)", took, synced-before, before, synced, n)
	// Only the objects in progress may go first (a few per worker). Without priorities the
	// change waits behind a random share of the whole queue: measured 640 copies first, or
	// more than 30 s.
	if synced-before > 100 {
		t.Errorf("the live change waited behind the initial sync: %d copies were written first", synced-before)
	}
}
