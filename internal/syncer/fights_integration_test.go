//go:build integration

package syncer_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/regionsync/regionsync/internal/syncer"
)

// countWrites counts the writes in ws whose path ends with suffix.
func countWrites(ws []string, suffix string) int {
	n := 0
	for _, w := range ws {
		if strings.HasSuffix(w, suffix) {
			n++
		}
	}
	return n
}

// fight runs flip every 200 ms for d.
func fight(d time.Duration, flip func(i int)) {
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		flip(i)
		time.Sleep(200 * time.Millisecond)
	}
}

// TestWriteLoopStatusBounded: a management writer that keeps rewriting the status the agent
// uploads does not make the agent write back as fast as the API server answers: at most a few
// writes, then one per 10 s, and a Warning event names the fight.
func TestWriteLoopStatusBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("fight-status")
	e.remoteSecret(ns)
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.remoteWrites.take()
	fight(20*time.Second, func(int) {
		remote, err := e.getRemote(ns, "acme")
		if err != nil {
			return
		}
		remote.Status.Phase = "Overwritten"
		_ = e.mgmt.Status().Update(context.Background(), remote)
	})
	n := countWrites(e.remoteWrites.take(), "/tenants/acme"+e.suffix+"/status")
	t.Logf("status uploads during a 20 s fight: %d", n)
	if n > 10 {
		t.Errorf("%d status uploads during a 20 s fight, want at most 10", n)
	}
	if n == 0 {
		t.Errorf("no status upload during the fight: the agent stopped returning the status")
	}
	e.waitEvent(e.mgmt, ns, "acme"+e.suffix, syncer.ReasonWriteFight)
}

// TestWriteLoopSpecBounded: a regional controller that keeps rewriting the spec of a copy under
// Replace is answered with at most a few reverts, then one per 10 s, and a Warning event on the
// copy; once it stops, the copy converges again.
func TestWriteLoopSpecBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ns := e.remoteNamespace("fight-spec")
	e.remoteSecret(ns) // every pass succeeds: the retry after the fight is the fight's own
	e.tenant(ns, "acme", "Acme")
	e.waitSynced(ns, "acme")
	e.localWrites.take()
	fight(20*time.Second, func(i int) {
		local, err := e.getLocal(ns, "acme")
		if err != nil {
			return
		}
		local.Spec.Replicas = int32(100 + i)
		_ = e.local.Update(context.Background(), local)
	})
	n := countWrites(e.localWrites.take(), "/namespaces/"+ns+"/tenants/acme")
	t.Logf("reverts during a 20 s fight: %d", n)
	if n > 10 {
		t.Errorf("%d reverts of the copy's spec during a 20 s fight, want at most 10", n)
	}
	if n == 0 {
		t.Errorf("no revert during the fight")
	}
	e.waitEvent(e.local, ns, "acme", syncer.ReasonWriteFight)
	// The other writer stopped: the copy converges back to management's spec.
	e.eventually("the copy converges after the fight", func() error {
		l, err := e.getLocal(ns, "acme")
		if err != nil {
			return err
		}
		if l.Spec.Replicas != 2 {
			return fmt.Errorf("replicas %d, want 2", l.Spec.Replicas)
		}
		return nil
	})
}
