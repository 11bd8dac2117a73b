//go:build integration

package syncer_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/regionsync/regionsync/internal/syncer"
	"github.com/regionsync/regionsync/pkg/regionsync"
	"github.com/regionsync/regionsync/test/framework/testenv"
)

// TestStartJitterOnRestart: a new region connects to management at once whatever
// management.startJitter is; restarted over its recorded management identity, it waits the drawn
// time (drawn in [0, startJitter)) before its first request to management, and then syncs as
// before.
func TestStartJitterOnRestart(t *testing.T) {
	var draws atomic.Int64
	var drawnMax atomic.Int64
	var wait atomic.Int64
	wait.Store(int64(time.Hour))
	t.Cleanup(syncer.SetStartJitterRand(func(limit time.Duration) time.Duration {
		draws.Add(1)
		drawnMax.Store(int64(limit))
		return time.Duration(wait.Load())
	}))
	e := newEnv(t, withOptions(func(o *regionsync.Options) {
		o.Management.StartJitter = 5 * time.Minute
	}))
	ns := e.remoteNamespace("jitter")
	e.tenant(ns, "acme", "Acme")
	e.eventually("copy of acme", func() error { _, err := e.getLocal(ns, "acme"); return err })
	if n := draws.Load(); n != 0 {
		t.Fatalf("a new region drew a start jitter %d times: it must connect at once", n)
	}
	recordKey := client.ObjectKey{Namespace: e.opts.Claim.FleetNamespace, Name: syncer.IdentityRecordName(e.opts.Region)}
	e.eventually("the identity recorded", func() error { return e.local.Get(e.ctx, recordKey, &corev1.ConfigMap{}) })

	// Restarted over its record: it waits (an hour here) and asks management nothing meanwhile.
	e.stop()
	e.start()
	e.eventually("the start jitter drawn", func() error {
		if n := draws.Load(); n != 1 {
			return fmt.Errorf("%d draws", n)
		}
		return nil
	})
	if got := time.Duration(drawnMax.Load()); got != 5*time.Minute {
		t.Errorf("the jitter was drawn below %s, want below management.startJitter (5m)", got)
	}
	testenv.Consistently(t, "no management session while the start jitter runs", 3*time.Second, func() error {
		if e.syncer.ManagementConnected() || e.syncer.Claim().Held {
			return errors.New("connected to management (or holding the claim) during the start jitter")
		}
		return nil
	})

	// A short wait drawn: it connects, claims and syncs a new object.
	wait.Store(int64(100 * time.Millisecond))
	e.stop()
	e.start()
	e.tenant(ns, "beta", "Beta")
	e.eventually("copy of beta after the jittered start", func() error { _, err := e.getLocal(ns, "beta"); return err })
	if n := draws.Load(); n != 2 {
		t.Errorf("%d start jitters drawn over two restarts, want 2", n)
	}
}
